//! Header fields in one buffer: a request's, as the parser read them, and a
//! response's, as an application gave them.
//!
//! Kept as a `(String, Vec<u8>)` per field, a request head cost two
//! allocations per field on the core thread (a browser's dozen fields: two
//! dozen), and a two-field WSGI answer five allocations on the pool thread,
//! each freed on the core: a free from another thread is mimalloc's slow
//! kind, and the allocating thread later collects the freed blocks again
//! (`_mi_page_free_collect` was the pool thread's largest allocator cost).
//! One buffer makes each of them one allocation and one free.

use std::fmt;

/// Header fields in order (duplicates kept), each a name (a `str`, as sent)
/// and a value (bytes), stored as `name length, value length, name, value`
/// one after another.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Fields {
    bytes: Vec<u8>,
    count: usize,
}

/// The two lengths before each field's bytes.
const LENGTHS: usize = 2 * std::mem::size_of::<usize>();

/// The most fields [`Fields::for_fields`] reserves room for.
pub const RESERVED_FIELDS: usize = 64;

impl Fields {
    /// Room for `fields` fields of `bytes` name and value bytes together.
    pub fn with_capacity(fields: usize, bytes: usize) -> Fields {
        Fields {
            bytes: Vec::with_capacity(fields.saturating_mul(LENGTHS).saturating_add(bytes)),
            count: 0,
        }
    }

    /// Room for `fields` fields of a typical size (64 name and value bytes
    /// each): an application's answer, whose sizes are not known in advance,
    /// usually fits without growing. The count is the app's word (a list's
    /// `__len__`), so the room is capped: past [`RESERVED_FIELDS`] the buffer
    /// grows with the fields actually pushed.
    pub fn for_fields(fields: usize) -> Fields {
        let fields = fields.min(RESERVED_FIELDS);
        Fields::with_capacity(fields, fields * 64)
    }

    /// Append a field (validated by the caller: the app interface's rules).
    pub fn push(&mut self, name: &str, value: &[u8]) {
        self.bytes.reserve(LENGTHS + name.len() + value.len());
        self.bytes.extend_from_slice(&name.len().to_ne_bytes());
        self.bytes.extend_from_slice(&value.len().to_ne_bytes());
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.extend_from_slice(value);
        self.count += 1;
    }

    /// How many fields.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The value of the first field named `name` (ASCII case-insensitive).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.all(name).next()
    }

    /// The values of every field named `name` (ASCII case-insensitive), in order.
    pub fn all<'a, 'n>(&'a self, name: &'n str) -> All<'a, 'n> {
        All {
            fields: Raw { rest: &self.bytes },
            name: name.as_bytes(),
        }
    }

    /// The fields in the order they were pushed.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            raw: Raw { rest: &self.bytes },
        }
    }
}

/// The fields as bytes, names included: what lookups by name compare.
struct Raw<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Raw<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let (lengths, rest) = self.rest.split_at_checked(LENGTHS)?;
        let (name_len, value_len) = lengths.split_at(LENGTHS / 2);
        let name_len = usize::from_ne_bytes(name_len.try_into().expect("a usize's bytes"));
        let value_len = usize::from_ne_bytes(value_len.try_into().expect("a usize's bytes"));
        let (name, rest) = rest.split_at(name_len);
        let (value, rest) = rest.split_at(value_len);
        self.rest = rest;
        Some((name, value))
    }
}

/// The fields of a [`Fields`], in order. Each name is checked to be UTF-8
/// as it comes (pushed from a `str`, it always is; a few cycles for a short
/// token): a caller that walks the fields more than once should collect them.
pub struct Iter<'a> {
    raw: Raw<'a>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let (name, value) = self.raw.next()?;
        let name = std::str::from_utf8(name).expect("a field name is pushed as a str");
        Some((name, value))
    }
}

/// The values of the fields of one name ([`Fields::all`]).
pub struct All<'a, 'n> {
    fields: Raw<'a>,
    name: &'n [u8],
}

impl<'a> Iterator for All<'a, '_> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let name = self.name;
        self.fields
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

impl<'a> IntoIterator for &'a Fields {
    type Item = (&'a str, &'a [u8]);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<N: AsRef<str>, V: AsRef<[u8]>> FromIterator<(N, V)> for Fields {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(fields: I) -> Fields {
        let mut out = Fields::default();
        for (name, value) in fields {
            out.push(name.as_ref(), value.as_ref());
        }
        out
    }
}

impl<N: AsRef<str>, V: AsRef<[u8]>> From<Vec<(N, V)>> for Fields {
    fn from(fields: Vec<(N, V)>) -> Fields {
        fields.into_iter().collect()
    }
}

impl fmt::Debug for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|(n, v)| (n, String::from_utf8_lossy(v).into_owned())),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_back_in_order_with_their_bytes() {
        let mut fields = Fields::with_capacity(3, 16);
        fields.push("Content-Type", b"text/plain");
        fields.push("X-Empty", b"");
        fields.push("Set-Cookie", b"a=\xe9; Path=/");
        assert_eq!(fields.len(), 3);
        let got: Vec<_> = fields.iter().collect();
        assert_eq!(
            got,
            [
                ("Content-Type", &b"text/plain"[..]),
                ("X-Empty", &b""[..]),
                ("Set-Cookie", &b"a=\xe9; Path=/"[..]),
            ]
        );
    }

    #[test]
    fn get_finds_the_first_of_a_name_in_any_case() {
        let fields: Fields = vec![("Host", "a"), ("X-A", "1"), ("x-a", "2")].into();
        assert_eq!(fields.get("x-A"), Some(&b"1"[..]));
        assert_eq!(fields.get("HOST"), Some(&b"a"[..]));
        assert_eq!(fields.get("X"), None);
    }

    #[test]
    fn an_apps_claimed_count_reserves_bounded_room() {
        // A headers object whose `__len__` says 2^40 must not ask for terabytes.
        let fields = Fields::for_fields(1 << 40);
        assert!(fields.bytes.capacity() <= RESERVED_FIELDS * (LENGTHS + 64));
        assert!(fields.is_empty());
    }

    #[test]
    fn none_is_empty() {
        let fields = Fields::default();
        assert!(fields.is_empty());
        assert_eq!(fields.iter().count(), 0);
    }

    #[test]
    fn built_from_pairs_equals_pushed() {
        let mut pushed = Fields::default();
        pushed.push("A", b"1");
        pushed.push("B", b"22");
        let built: Fields = vec![("A", "1"), ("B", "22")].into();
        assert_eq!(built, pushed);
        assert_eq!(format!("{built:?}"), r#"[("A", "1"), ("B", "22")]"#);
    }

    #[test]
    fn one_allocation_holds_every_field() {
        let mut fields = Fields::with_capacity(2, 10);
        let before = fields.bytes.capacity();
        fields.push("Ab", b"cde");
        fields.push("F", b"ghij");
        assert_eq!(
            fields.bytes.capacity(),
            before,
            "grew past the reserved room"
        );
    }
}
