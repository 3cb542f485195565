//! The readiness flag (`--ready-path`), as the supervisor keeps it for all
//! its workers.

use super::{Action, Level, Machine, Tracked};

impl Machine {
    /// Set the flag once every slot has held a ready worker (the start is
    /// over), while at least one ready worker has not begun a drain and no
    /// shutdown has begun; clear it otherwise. A worker that died leaves the
    /// pod ready while a sibling serves (taking the pod out of its Service
    /// for one crash would move all its load onto the others); only with no
    /// worker left serving is it 503. A rolling restart keeps it set: a
    /// slot's old worker stays in it until its replacement is ready.
    pub(super) fn publish(&mut self) {
        if !self.config.readiness {
            return;
        }
        let slotted = || self.slots.iter().map(|s| s.worker.as_ref());
        self.came_up = self.came_up || slotted().all(|w| w.is_some_and(Tracked::serving));
        let ready = !self.stopping()
            && !self.delaying()
            && self.came_up
            && slotted().any(|w| w.is_some_and(Tracked::serving));
        if ready != self.published {
            self.published = ready;
            self.out.push(Action::Publish(ready));
            let code = if ready { "200" } else { "503" };
            self.out.log(Level::Debug, format!("readiness: {code}"));
        }
    }
}
