//! Session tickets every worker of a supervisor can open, so that a client
//! resumes its session whichever worker its next connection reaches.
//!
//! rustls' own ticketer makes its keys in each process, so with several
//! workers a client came back to the worker that issued its ticket only one
//! time in N. Here the supervisor makes one secret and hands it to each
//! worker it starts ([`Seed`], through an inherited pipe); every worker
//! derives the same keys from it.
//!
//! Keys rotate by period ([`PERIOD`]): period p's key is derived from its
//! secret, and the next period's secret from this one by a one-way step (a
//! ratchet), so a process that holds period p's secret cannot recompute the
//! keys of periods before p. Workers keep the current period's key and the
//! one before (a ticket lives at most two periods, and tells the client one);
//! the supervisor keeps only the secret of the period before the current
//! one, for the workers it starts. Tickets are sealed with ChaCha20-Poly1305
//! under a random nonce, the period in the clear and authenticated.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::hkdf::{self, Salt, HKDF_SHA256};
use ring::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;

/// How long one key seals new tickets.
pub const PERIOD: u64 = 6 * 60 * 60;

/// A period's secret: where its key and the next period's secret come from.
#[derive(Clone, PartialEq, Eq)]
pub struct Seed {
    pub period: u64,
    pub secret: [u8; 32],
}

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seed")
            .field("period", &self.period)
            .finish_non_exhaustive()
    }
}

/// The period a moment (seconds since the epoch) falls in.
fn period_at(secs: u64) -> u64 {
    secs / PERIOD
}

/// The period now.
pub fn now_period() -> u64 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    period_at(secs)
}

/// 32 bytes of `secret` expanded under `label`.
fn expand(secret: &[u8; 32], label: &[u8]) -> [u8; 32] {
    struct Len;
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            32
        }
    }
    let prk = Salt::new(HKDF_SHA256, b"m0serve session tickets").extract(secret);
    let mut out = [0u8; 32];
    prk.expand(&[label], Len)
        .and_then(|okm| okm.fill(&mut out))
        .expect("32 bytes is a valid HKDF-SHA256 output");
    out
}

impl Seed {
    /// A fresh secret for the current period.
    pub fn generate() -> Result<Seed, ring::error::Unspecified> {
        let mut secret = [0u8; 32];
        SystemRandom::new().fill(&mut secret)?;
        Ok(Seed {
            period: now_period(),
            secret,
        })
    }

    /// The next period's seed (the one-way step).
    pub fn next(&self) -> Seed {
        Seed {
            period: self.period + 1,
            secret: expand(&self.secret, b"next period"),
        }
    }

    /// This seed moved forward to `period` (itself if it is not later).
    pub fn at(&self, period: u64) -> Seed {
        let mut seed = self.clone();
        while seed.period < period {
            seed = seed.next();
        }
        seed
    }

    fn key(&self) -> LessSafeKey {
        let bytes = expand(&self.secret, b"ticket key");
        LessSafeKey::new(
            UnboundKey::new(&CHACHA20_POLY1305, &bytes).expect("a 32-byte ChaCha20 key"),
        )
    }

    /// 40 bytes: the period (big-endian), then the secret.
    pub fn to_bytes(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[..8].copy_from_slice(&self.period.to_be_bytes());
        out[8..].copy_from_slice(&self.secret);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<Seed> {
        let bytes: &[u8; 40] = bytes.try_into().ok()?;
        Some(Seed {
            period: u64::from_be_bytes(bytes[..8].try_into().ok()?),
            secret: bytes[8..].try_into().ok()?,
        })
    }
}

/// The keys one process seals and opens tickets with.
pub struct Tickets {
    state: Mutex<State>,
    random: SystemRandom,
    /// Where the current period comes from (a clock; tests pass their own).
    clock: fn() -> u64,
}

struct State {
    /// The current period's seed, and the keys of it and the one before.
    seed: Seed,
    current: LessSafeKey,
    previous: Option<LessSafeKey>,
}

impl State {
    fn new(from: &Seed, period: u64) -> State {
        // `from` is at most the period before: the previous key comes from it.
        let previous = (from.period < period).then(|| from.at(period - 1).key());
        let seed = from.at(period);
        State {
            current: seed.key(),
            previous,
            seed,
        }
    }
}

impl Tickets {
    /// Tickets from `seed` (the current period's, or the one before).
    pub fn new(seed: &Seed) -> Tickets {
        Tickets::with_clock(seed, now_period)
    }

    fn with_clock(seed: &Seed, clock: fn() -> u64) -> Tickets {
        let period = clock().max(seed.period);
        Tickets {
            state: Mutex::new(State::new(seed, period)),
            random: SystemRandom::new(),
            clock,
        }
    }

    /// The state, moved on to the current period.
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let period = (self.clock)();
        if period > state.seed.period {
            let from = state.seed.clone();
            *state = State::new(&from, period);
            if period > from.period + 1 {
                // Skipped a period: its key was never ours to keep.
                state.previous = Some(from.at(period - 1).key());
            }
        }
        state
    }
}

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tickets").finish_non_exhaustive()
    }
}

impl ProducesTickets for Tickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        PERIOD as u32
    }

    /// `period (8) || nonce (12) || sealed plaintext and tag`.
    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let state = self.state();
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).ok()?;
        let period = state.seed.period.to_be_bytes();
        let mut sealed = plain.to_vec();
        state
            .current
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(period),
                &mut sealed,
            )
            .ok()?;
        let mut ticket = Vec::with_capacity(8 + NONCE_LEN + sealed.len());
        ticket.extend_from_slice(&period);
        ticket.extend_from_slice(&nonce);
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < 8 + NONCE_LEN + aead::MAX_TAG_LEN {
            return None;
        }
        let (period, rest) = ticket.split_at(8);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let at = u64::from_be_bytes(period.try_into().ok()?);
        let state = self.state();
        let key = if at == state.seed.period {
            &state.current
        } else if at + 1 == state.seed.period {
            state.previous.as_ref()?
        } else {
            return None;
        };
        let mut plain = sealed.to_vec();
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let len = key
            .open_in_place(
                nonce,
                Aad::from(<[u8; 8]>::try_from(period).ok()?),
                &mut plain,
            )
            .ok()?
            .len();
        plain.truncate(len);
        Some(plain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn seed(period: u64) -> Seed {
        Seed {
            period,
            secret: [7; 32],
        }
    }

    #[test]
    fn every_process_with_the_seed_opens_every_others_tickets() {
        static NOW: AtomicU64 = AtomicU64::new(1000);
        fn clock() -> u64 {
            NOW.load(Ordering::SeqCst)
        }
        let a = Tickets::with_clock(&seed(1000), clock);
        let b = Tickets::with_clock(&seed(1000), clock);
        let ticket = a.encrypt(b"resumption state").unwrap();
        assert_eq!(b.decrypt(&ticket).unwrap(), b"resumption state");
        // Another secret opens nothing.
        let stranger = Tickets::with_clock(
            &Seed {
                period: 1000,
                secret: [8; 32],
            },
            clock,
        );
        assert!(stranger.decrypt(&ticket).is_none());
        // Nor does a ticket altered anywhere.
        for i in [0, 8, 20, ticket.len() - 1] {
            let mut bad = ticket.clone();
            bad[i] ^= 1;
            assert!(
                a.decrypt(&bad).is_none(),
                "byte {i} altered and still opened"
            );
        }
    }

    #[test]
    fn a_ticket_lives_its_period_and_the_next_then_no_longer() {
        static NOW: AtomicU64 = AtomicU64::new(2000);
        fn clock() -> u64 {
            NOW.load(Ordering::SeqCst)
        }
        let t = Tickets::with_clock(&seed(2000), clock);
        let ticket = t.encrypt(b"x").unwrap();
        // A worker started later, from the supervisor's seed of the period before.
        NOW.store(2001, Ordering::SeqCst);
        assert_eq!(t.decrypt(&ticket).unwrap(), b"x");
        let late = Tickets::with_clock(&seed(2000), clock);
        assert_eq!(late.decrypt(&ticket).unwrap(), b"x");
        let newer = t.encrypt(b"y").unwrap();
        assert_eq!(late.decrypt(&newer).unwrap(), b"y");
        NOW.store(2002, Ordering::SeqCst);
        assert!(
            t.decrypt(&ticket).is_none(),
            "a ticket outlived two periods"
        );
        assert_eq!(t.decrypt(&newer).unwrap(), b"y");
    }

    #[test]
    fn the_ratchet_runs_one_way_and_its_bytes_round_trip() {
        let s = seed(5);
        assert_eq!(s.at(7), s.next().next());
        assert_ne!(s.next().secret, s.secret);
        assert_eq!(Seed::from_bytes(&s.to_bytes()), Some(s.clone()));
        assert!(Seed::from_bytes(&[0; 39]).is_none());
    }
}
