use super::*;

/// A filesystem laid out under a fresh temporary directory, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn new(tag: &str) -> Tree {
        let dir = std::env::temp_dir().join(format!("m0-quota-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Tree(dir)
    }

    fn write(&self, rel: &str, text: &str) -> &Tree {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
        self
    }

    fn scan(&self, cgroup: &str, mountinfo: &str) -> Scan {
        scan(&self.0, cgroup, mountinfo)
    }

    fn dir(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const V2_MOUNT: &str =
    "41 31 0:38 / /sys/fs/cgroup rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n";
const V1_MOUNT: &str = "25 24 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n\
    32 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n\
    33 25 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";

fn cpus(scan: &Scan) -> Option<usize> {
    scan.quota.as_ref().map(|q| q.cpus)
}

#[test]
fn v2_a_tighter_parent_binds_its_child() {
    let t = Tree::new("v2-parent");
    t.write("sys/fs/cgroup/kubepods/cpu.max", "150000 100000\n")
        .write("sys/fs/cgroup/kubepods/pod1/cpu.max", "400000 100000\n")
        .write("sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "max 100000\n");
    let s = t.scan("0::/kubepods/pod1/c1\n", V2_MOUNT);
    let q = s.quota.unwrap();
    // 1.5 CPUs of time: rounded up.
    assert_eq!(q.cpus, 2);
    assert_eq!(q.dir, t.dir("sys/fs/cgroup/kubepods"));
    assert_eq!(
        q.to_string(),
        format!(
            "cgroup cpu.max 150000/100000 at {}",
            t.dir("sys/fs/cgroup/kubepods").display()
        )
    );
    assert!(s.ignored.is_empty(), "{:?}", s.ignored);
}

#[test]
fn v2_a_tighter_child_wins_over_its_parent() {
    let t = Tree::new("v2-child");
    t.write("sys/fs/cgroup/pod/cpu.max", "400000 100000\n")
        .write("sys/fs/cgroup/pod/c1/cpu.max", "200000 100000\n");
    assert_eq!(cpus(&t.scan("0::/pod/c1\n", V2_MOUNT)), Some(2));
}

#[test]
fn v2_max_everywhere_is_no_quota() {
    let t = Tree::new("v2-max");
    t.write("sys/fs/cgroup/a/cpu.max", "max 100000\n")
        .write("sys/fs/cgroup/a/b/cpu.max", "max\n");
    let s = t.scan("0::/a/b\n", V2_MOUNT);
    assert_eq!(s.quota, None);
    assert!(s.ignored.is_empty(), "{:?}", s.ignored);
}

#[test]
fn v2_the_namespace_root_itself_is_read() {
    // A container with its own cgroup namespace: it sits at `/`, and its
    // limit is in the mount's top directory.
    let t = Tree::new("v2-ns");
    t.write("sys/fs/cgroup/cpu.max", "50000 100000\n");
    let q = t.scan("0::/\n", V2_MOUNT).quota.unwrap();
    // Half a CPU is still one core thread.
    assert_eq!(q.cpus, 1);
    assert_eq!(q.dir, t.dir("sys/fs/cgroup"));
}

#[test]
fn v1_quota_over_period() {
    let t = Tree::new("v1");
    t.write(
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us",
        "250000\n",
    )
    .write(
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us",
        "100000\n",
    )
    .write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    .write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    let cgroup = "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n";
    let q = t.scan(cgroup, V1_MOUNT).quota.unwrap();
    assert_eq!((q.cpus, q.quota_us, q.period_us), (3, 250000, 100000));
    assert_eq!(q.file, "cpu.cfs_quota_us");
}

#[test]
fn v1_minus_one_is_no_quota() {
    let t = Tree::new("v1-none");
    t.write("sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us", "-1\n")
        .write("sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_period_us", "100000\n");
    let s = t.scan("4:cpu,cpuacct:/a\n", V1_MOUNT);
    assert_eq!(s.quota, None);
    assert!(s.ignored.is_empty(), "{:?}", s.ignored);
}

#[test]
fn v1_a_mount_rooted_at_the_container_cgroup() {
    // Docker without a cgroup namespace: /proc/self/cgroup names the full
    // path, and the mount shows that cgroup at the mount point.
    let t = Tree::new("v1-root");
    t.write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "200000\n")
        .write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    let mountinfo = "40 31 0:37 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n";
    let q = t.scan("3:cpu:/docker/abc\n", mountinfo).quota.unwrap();
    assert_eq!((q.cpus, q.dir), (2, t.dir("sys/fs/cgroup/cpu")));
}

#[test]
fn hybrid_layout_reads_the_v1_cpu_controller() {
    // cgroup v1 controllers beside an empty v2 hierarchy (this sandbox's layout).
    let t = Tree::new("hybrid");
    t.write("sys/fs/cgroup/cpu/x/cpu.cfs_quota_us", "100000\n")
        .write("sys/fs/cgroup/cpu/x/cpu.cfs_period_us", "100000\n");
    let mountinfo = "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
    let s = t.scan("2:cpuacct:/\n1:cpu:/x\n0::/\n", mountinfo);
    assert_eq!(cpus(&s), Some(1));
}

#[test]
fn missing_files_and_mounts_are_no_quota() {
    let t = Tree::new("missing");
    let s = t.scan("0::/a/b\n", V2_MOUNT);
    assert_eq!((s.quota, s.ignored.len()), (None, 0));
    // No cgroup mount at all, or no /proc/self/cgroup.
    assert_eq!(t.scan("0::/a\n", "").quota, None);
    assert_eq!(t.scan("", V2_MOUNT).quota, None);
}

#[test]
fn garbage_is_ignored_with_a_reason_and_the_other_levels_still_count() {
    let t = Tree::new("garbage");
    t.write("sys/fs/cgroup/a/cpu.max", "300000 100000\n")
        .write("sys/fs/cgroup/a/b/cpu.max", "lots\tof cpu\n")
        .write("sys/fs/cgroup/a/b/c/cpu.max", "0 100000\n");
    let s = t.scan("0::/a/b/c\n", V2_MOUNT);
    assert_eq!(cpus(&s), Some(3));
    assert_eq!(s.ignored.len(), 2, "{:?}", s.ignored);
    assert!(s.ignored[0].contains("a/b/c/cpu.max: unreadable limit \"0 100000\""));
    assert!(s.ignored[1].contains("a/b/cpu.max: unreadable limit"));

    let t = Tree::new("garbage-v1");
    t.write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "fast\n")
        .write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    let s = t.scan("4:cpu,cpuacct:/\n", V1_MOUNT);
    assert_eq!(s.quota, None);
    assert_eq!(s.ignored.len(), 1);
}

#[test]
fn a_cgroup_outside_the_mount_is_ignored_with_a_reason() {
    let t = Tree::new("outside");
    let mountinfo = "40 31 0:37 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
    let s = t.scan("0::/system.slice/other\n", mountinfo);
    assert_eq!(s.quota, None);
    assert!(s.ignored[0].contains("outside"), "{:?}", s.ignored);
    let s = t.scan("0::/docker/abc/../x\n", mountinfo);
    assert!(s.ignored[0].contains("outside"), "{:?}", s.ignored);
}

#[test]
fn mount_points_are_unescaped() {
    let t = Tree::new("escaped");
    t.write("cg roup/cpu.max", "100000 100000\n");
    let mountinfo = "41 31 0:38 / /cg\\040roup rw - cgroup2 cgroup2 rw\n";
    assert_eq!(cpus(&t.scan("0::/\n", mountinfo)), Some(1));
}
