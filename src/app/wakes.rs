//! How an application's wakes of other threads are put off, in one place:
//! the only door from the application interfaces to the two thread-locals
//! that do it (`backend::pass_end`, `backend::held`).
//!
//! - Core → app: [`App::call`](super::App::call) runs on a core thread. An
//!   app that hands the request to a thread sharing the core's CPU queues it
//!   at once but [`defer`]s the wake to the end of the core's pass, which the
//!   backend's loop pays before it waits.
//! - App → core: a thread about to finish many requests in a burst (the ASGI
//!   loop, per batch) [`hold`]s its wakes of the cores: the conduits'
//!   notifications are queued at once and each core is woken once, at
//!   [`release`] (or within [`backend::held::HOLD_BOUND`](crate::backend::held::HOLD_BOUND)).
//!
//! Why thread-locals and not a parameter of [`App::call`](super::App::call)
//! and of the [`Conduit`](super::Conduit)'s calls: the one who pays (the core
//! loop at its pass end, the ASGI loop after its batch) is several calls above
//! the one who owes (a pool submit inside `App::call`, a notification inside a
//! `Conduit` send from a Python callback), and each path between them is on
//! every request: a context passed down would be one more argument through
//! every `Session` method and every app-side `Conduit` call for the same
//! effect, while the thread-local costs one TLS read where a wake is made,
//! with no lock and no allocation. What putting the wakes off is worth:
//! `bench/results/pool-wakes-workers.md`, `bench/results/pool-chain-workers.md`
//! and `bench/results/asgi-release-every.md` (summed up under "Scheduling
//! knobs" in `bench/HISTORY.md`).

pub use crate::backend::held::{hold, refresh, release};
pub use crate::backend::pass_end::{defer, on_core_thread, Wake};
