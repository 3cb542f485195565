//! The mechanism knobs (`M0_*`): read once at start-up, here alone, and
//! passed down to what they switch.
//!
//! They are for experiments, not for tuning a deployment: each turns a
//! mechanism off (the negative arm of the test or probe that proves it), or
//! picks the other side of an A/B of a scheduling choice. The table of them,
//! and what each prevents, is docs/settings.md's "Mechanism knobs"; a knob
//! nothing exercises is deleted, not kept. A value that is not a number, or a
//! switch that is not `0` or `1`, is refused at start, not guessed at.

use std::time::Duration;

/// Every `M0_*` knob, parsed ([`Tuning::from_env`]) or set by a test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// `M0_ACCEPT_BATCH`: admissions per door per pass (0: no limit).
    pub accept_batch: usize,
    /// `M0_ACCEPT_SHARE`: a core hands connections to an idle sibling.
    pub accept_share: bool,
    /// `M0_ACCEPT_ROTATE`: io_uring workers sharing a listener arm one
    /// single-shot accept at a time, not a multishot.
    pub accept_rotate: bool,
    /// `M0_ACCEPT_BALANCE`: the supervisor shares a connection tally.
    pub accept_balance: bool,
    /// `M0_LINGER_MS`: the quiet spell that ends a lingering close (None: `0`,
    /// closed at once).
    pub linger: Option<Duration>,
    /// `M0_DRAIN_IDLE_MS`: how long after its last answer a keep-alive
    /// connection idle at the drain's start is kept for a request that may
    /// be on its way (None: `0`, closed at once, the negative arm).
    pub drain_idle: Option<Duration>,
    /// `M0_URING_DISABLED`: act as if the kernel refused io_uring.
    pub uring_disabled: bool,
    /// `M0_H2_FLOOD_GUARD`: HTTP/2's meter of frames that carry nothing
    /// (`crate::h2::flood`); 0 leaves a connection unmetered.
    pub h2_flood_guard: bool,
    /// `M0_H2_RESET_GUARD`: HTTP/2's budgets of streams reset before they
    /// were accepted and of resets a client provokes (the rapid reset
    /// attack); 0 lifts both.
    pub h2_reset_guard: bool,
    /// `M0_POOL_TURN`: the GIL turn's barrier and keep rule.
    pub pool_turn: bool,
    /// `M0_POOL_TURN_KEEP`: the keep rule alone.
    pub pool_turn_keep: bool,
    /// `M0_POOL_DEBUG`: the pool's histograms, printed at exit.
    pub pool_debug: bool,
    /// `M0_POOL_BATCH`, `M0_POOL_DEFER_WAKE`, `M0_CORE_BATCH`: set, or (None)
    /// the default of a process confined to its cores' CPUs or not.
    pub pool_batch: Option<bool>,
    pub pool_defer_wake: Option<bool>,
    pub core_batch: Option<bool>,
}

/// Admissions per door per pass by default (docs/design/accept-batch.md).
pub const DEFAULT_ACCEPT_BATCH: usize = 16;
/// How long after its last answer an idle keep-alive connection is kept by a
/// drain by default: far beyond the gap between an answer and the next
/// request of a client that sends back to back (a round trip; on loopback
/// well under a millisecond, bench/results/drain-idle-gap.md), and short
/// enough that a drain of idle connections stays short.
pub const DEFAULT_DRAIN_IDLE: Duration = Duration::from_millis(1000);
/// The lingering close's quiet spell by default: as long as a WebSocket
/// client has to answer our Close, and nginx's `lingering_timeout`.
pub const DEFAULT_LINGER: Duration = Duration::from_millis(5000);

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            accept_batch: DEFAULT_ACCEPT_BATCH,
            accept_share: true,
            accept_rotate: true,
            accept_balance: true,
            linger: Some(DEFAULT_LINGER),
            drain_idle: Some(DEFAULT_DRAIN_IDLE),
            uring_disabled: false,
            h2_flood_guard: true,
            h2_reset_guard: true,
            pool_turn: true,
            pool_turn_keep: true,
            pool_debug: false,
            pool_batch: None,
            pool_defer_wake: None,
            core_batch: None,
        }
    }
}

impl Tuning {
    /// The knobs this process's environment sets; the rest keep their defaults.
    pub fn from_env() -> Result<Tuning, String> {
        Tuning::from_vars(|name| std::env::var(name).ok())
    }

    /// The knobs `var` names (a variable's value, None where unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Tuning, String> {
        let d = Tuning::default();
        let switch = |name: &str| -> Result<Option<bool>, String> {
            match var(name).as_deref().map(str::trim) {
                None => Ok(None),
                Some("0") => Ok(Some(false)),
                Some("1") => Ok(Some(true)),
                Some(other) => Err(format!("{name} must be 0 or 1, got {other:?}")),
            }
        };
        let number = |name: &str| -> Result<Option<u64>, String> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| format!("{name} must be a whole number, got {v:?}"))
                })
                .transpose()
        };
        Ok(Tuning {
            accept_batch: number("M0_ACCEPT_BATCH")?.map_or(d.accept_batch, |n| n as usize),
            accept_share: switch("M0_ACCEPT_SHARE")?.unwrap_or(d.accept_share),
            accept_rotate: switch("M0_ACCEPT_ROTATE")?.unwrap_or(d.accept_rotate),
            accept_balance: switch("M0_ACCEPT_BALANCE")?.unwrap_or(d.accept_balance),
            linger: match number("M0_LINGER_MS")? {
                None => d.linger,
                Some(0) => None,
                Some(ms) => Some(Duration::from_millis(ms)),
            },
            drain_idle: match number("M0_DRAIN_IDLE_MS")? {
                None => d.drain_idle,
                Some(0) => None,
                Some(ms) => Some(Duration::from_millis(ms)),
            },
            uring_disabled: switch("M0_URING_DISABLED")?.unwrap_or(d.uring_disabled),
            h2_flood_guard: switch("M0_H2_FLOOD_GUARD")?.unwrap_or(d.h2_flood_guard),
            h2_reset_guard: switch("M0_H2_RESET_GUARD")?.unwrap_or(d.h2_reset_guard),
            pool_turn: switch("M0_POOL_TURN")?.unwrap_or(d.pool_turn),
            pool_turn_keep: switch("M0_POOL_TURN_KEEP")?.unwrap_or(d.pool_turn_keep),
            pool_debug: switch("M0_POOL_DEBUG")?.unwrap_or(d.pool_debug),
            pool_batch: switch("M0_POOL_BATCH")?,
            pool_defer_wake: switch("M0_POOL_DEFER_WAKE")?,
            core_batch: switch("M0_CORE_BATCH")?,
        })
    }

    /// The GIL turn's switches for a process whose threads are (or not)
    /// `confined` to its cores' CPUs, with the knobs set here over the
    /// pool's defaults for it.
    #[cfg(feature = "python")]
    pub fn turn(&self, confined: bool) -> m0serve_pool::TurnConfig {
        let d = m0serve_pool::TurnConfig::defaults(confined);
        let batch = self.pool_batch.unwrap_or(d.batch);
        m0serve_pool::TurnConfig {
            turn: self.pool_turn,
            keep: self.pool_turn_keep,
            debug: self.pool_debug,
            batch,
            defer_wake: self.pool_defer_wake.unwrap_or(d.defer_wake),
            // Never both sides of the pair by default (the pool's rule).
            core_batch: self.core_batch.unwrap_or(d.core_batch && !batch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(set: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            set.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn an_empty_environment_gives_the_defaults() {
        assert_eq!(Tuning::from_vars(vars(&[])), Ok(Tuning::default()));
    }

    #[test]
    fn each_knob_is_read_from_its_variable() {
        let t = Tuning::from_vars(vars(&[
            ("M0_ACCEPT_BATCH", "0"),
            ("M0_ACCEPT_SHARE", "0"),
            ("M0_ACCEPT_ROTATE", " 0 "),
            ("M0_ACCEPT_BALANCE", "0"),
            ("M0_LINGER_MS", "0"),
            ("M0_DRAIN_IDLE_MS", "0"),
            ("M0_URING_DISABLED", "1"),
            ("M0_H2_FLOOD_GUARD", "0"),
            ("M0_H2_RESET_GUARD", "0"),
            ("M0_POOL_TURN", "0"),
            ("M0_POOL_TURN_KEEP", "0"),
            ("M0_POOL_DEBUG", "1"),
            ("M0_POOL_BATCH", "0"),
            ("M0_POOL_DEFER_WAKE", "1"),
            ("M0_CORE_BATCH", "1"),
        ]))
        .unwrap();
        assert_eq!(
            t,
            Tuning {
                accept_batch: 0,
                accept_share: false,
                accept_rotate: false,
                accept_balance: false,
                linger: None,
                drain_idle: None,
                uring_disabled: true,
                h2_flood_guard: false,
                h2_reset_guard: false,
                pool_turn: false,
                pool_turn_keep: false,
                pool_debug: true,
                pool_batch: Some(false),
                pool_defer_wake: Some(true),
                core_batch: Some(true),
            }
        );
        let t = Tuning::from_vars(vars(&[("M0_LINGER_MS", "250")])).unwrap();
        assert_eq!(t.linger, Some(Duration::from_millis(250)));
    }

    #[test]
    fn a_value_that_is_not_one_is_refused_by_name() {
        let e = Tuning::from_vars(vars(&[("M0_ACCEPT_BATCH", "lots")])).unwrap_err();
        assert_eq!(e, r#"M0_ACCEPT_BATCH must be a whole number, got "lots""#);
        let e = Tuning::from_vars(vars(&[("M0_POOL_TURN", "off")])).unwrap_err();
        assert_eq!(e, r#"M0_POOL_TURN must be 0 or 1, got "off""#);
    }

    #[cfg(feature = "python")]
    #[test]
    fn the_turn_follows_confinement_unless_a_knob_says_otherwise() {
        let t = Tuning::default();
        let alone = t.turn(false);
        assert!(alone.batch && !alone.defer_wake && !alone.core_batch);
        let confined = t.turn(true);
        assert!(!confined.batch && confined.defer_wake && confined.core_batch);
        let t = Tuning {
            pool_batch: Some(true),
            ..Tuning::default()
        };
        // A batched pool puts no core behind it by default.
        assert!(!t.turn(true).core_batch);
    }
}
