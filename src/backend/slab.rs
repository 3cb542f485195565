//! A core's connections by [`Key`]: slots reused, each use of a slot told
//! apart by its generation.
//!
//! Both backends keep their connections here. A key outlives its connection
//! in places the core does not control: an io_uring completion that lands
//! after its connection closed, a [`super::Notifier`] fired from an app thread
//! after the client left. The generation changes whenever a slot is freed, so
//! such a late key finds nothing instead of the slot's next connection.

/// One connection's name: its slot and the slot's generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    slot: u32,
    generation: u32,
}

impl Key {
    /// Bits a generation keeps: an io_uring user_data holds 24 of them
    /// (`m0serve_uring::Token`), so keys round-trip through it unchanged.
    pub const GENERATION_BITS: u32 = 24;
    const GENERATION_MASK: u32 = (1 << Self::GENERATION_BITS) - 1;

    /// The key of `slot` in `generation` (kept modulo 2^24).
    pub fn new(slot: u32, generation: u32) -> Key {
        Key {
            slot,
            generation: generation & Self::GENERATION_MASK,
        }
    }

    pub fn slot(self) -> u32 {
        self.slot
    }

    pub fn generation(self) -> u32 {
        self.generation
    }

    /// The key as one number (for queues that carry plain integers).
    pub fn to_bits(self) -> u64 {
        u64::from(self.generation) << 32 | u64::from(self.slot)
    }

    pub fn from_bits(bits: u64) -> Key {
        Key::new(bits as u32, (bits >> 32) as u32)
    }
}

/// Values by [`Key`].
pub struct Slab<T> {
    slots: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }
}

impl<T> Slab<T> {
    /// Insert the value `make` builds from its own key (a session needs its
    /// key, inside its notifier, before it exists).
    pub fn insert_with(&mut self, make: impl FnOnce(Key) -> T) -> Key {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push((0, None));
                (self.slots.len() - 1) as u32
            }
        };
        let entry = &mut self.slots[slot as usize];
        let key = Key::new(slot, entry.0);
        entry.1 = Some(make(key));
        self.live += 1;
        key
    }

    pub fn insert(&mut self, value: T) -> Key {
        self.insert_with(|_| value)
    }

    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        match self.slots.get_mut(key.slot as usize)? {
            (generation, value) if *generation == key.generation => value.as_mut(),
            _ => None,
        }
    }

    /// Remove the value `key` names; the slot's next value gets a new generation.
    pub fn remove(&mut self, key: Key) -> Option<T> {
        let (generation, value) = self.slots.get_mut(key.slot as usize)?;
        if *generation != key.generation {
            return None;
        }
        let value = value.take()?;
        *generation = (*generation).wrapping_add(1) & Key::GENERATION_MASK;
        self.free.push(key.slot);
        self.live -= 1;
        Some(value)
    }

    /// The key of the value living in `slot`, if one is (for names that
    /// carry only the slot: readiness events, deadline entries).
    pub fn key_of(&self, slot: usize) -> Option<Key> {
        match self.slots.get(slot)? {
            (generation, Some(_)) => Some(Key::new(slot as u32, *generation)),
            _ => None,
        }
    }

    /// The live keys now (a copy: callers remove as they go).
    pub fn keys(&self) -> Vec<Key> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, (_, v))| v.is_some())
            .map(|(i, (g, _))| Key::new(i as u32, *g))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_slot_does_not_answer_to_its_old_key() {
        let mut s = Slab::default();
        let a = s.insert('a');
        let b = s.insert('b');
        assert_eq!(s.remove(a), Some('a'));
        assert_eq!(s.remove(a), None, "a value is removed once");
        let c = s.insert('c');
        assert_eq!(c.slot(), a.slot(), "the freed slot is reused");
        assert_ne!(c, a);
        assert_eq!(s.get_mut(a), None, "the old key is stale");
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get_mut(c), Some(&mut 'c'));
        assert_eq!(s.key_of(a.slot() as usize), Some(c));
        assert_eq!(s.keys(), vec![c, b]);
        assert_eq!(s.len(), 2);
        s.remove(b);
        s.remove(c);
        assert!(s.is_empty());
        assert_eq!(s.key_of(b.slot() as usize), None);
    }

    #[test]
    fn insert_with_hands_the_value_its_own_key() {
        let mut s = Slab::default();
        let first = s.insert(Key::new(99, 0));
        s.remove(first);
        let k = s.insert_with(|k| k);
        assert_eq!(s.get_mut(k).copied(), Some(k));
    }

    #[test]
    fn keys_round_trip_through_bits_and_generations_wrap_at_24_bits() {
        let k = Key::new(0xdead_beef, 0x00ab_cdef);
        assert_eq!(Key::from_bits(k.to_bits()), k);
        assert_eq!(Key::new(1, 1 << 24), Key::new(1, 0));
        let mut s = Slab::default();
        s.slots.push((Key::GENERATION_MASK, None));
        s.free.push(0);
        let last = s.insert(());
        assert_eq!(last.generation(), Key::GENERATION_MASK);
        s.remove(last);
        assert_eq!(s.insert(()).generation(), 0, "the generation wraps");
    }
}
