//! [`TokenTable`]: a vocabulary's token → index map for the hot loop of
//! `text_vectorization`, comparing keys eight bytes at a time.
//!
//! A general hash map of `Vec<u8>` keys hashes a token byte by byte and compares it with
//! `memcmp`, a library call, for every hit: for tokens of a few bytes that call and the
//! byte loop were a fifth of vectorizing. Here a token of at most [`WORDS`] × 8 bytes is
//! hashed and compared as little-endian `u64` words, zero-padded past its end (keys are
//! kept padded the same way), so a probe is a handful of integer operations. The keys sit
//! in the slots themselves (24 bytes each, the table at most 3/4 full), so a lookup is one
//! random memory access, and a 20,000-token vocabulary fits in a core's L2 cache. Longer
//! tokens go through a plain map.

use rustc_hash::FxHashMap;

/// Words of a short token: tokens of up to `8 * WORDS` bytes take the fast path.
pub(crate) const WORDS: usize = 2;

/// A token being assembled: its bytes, zero past its length (within the first
/// `8 * WORDS` bytes), so that its words can be read whole.
#[derive(Clone)]
pub(crate) struct Token {
    bytes: [u8; 8 * WORDS],
    len: usize,
    /// The token when it outgrows `bytes`.
    long: Vec<u8>,
}

impl Default for Token {
    fn default() -> Self {
        Token {
            bytes: [0; 8 * WORDS],
            len: 0,
            long: Vec::new(),
        }
    }
}

impl Token {
    /// Appends a byte.
    #[inline]
    pub(crate) fn push(&mut self, b: u8) {
        if self.len < self.bytes.len() {
            self.bytes[self.len] = b;
        } else {
            if self.len == self.bytes.len() {
                self.long.clear();
                self.long.extend_from_slice(&self.bytes);
            }
            self.long.push(b);
        }
        self.len += 1;
    }

    /// Whether it has no byte.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties it (zeroing the bytes used, so that the padding stays zero).
    #[inline]
    pub(crate) fn clear(&mut self) {
        let used = self.len.min(self.bytes.len());
        self.bytes[..used].fill(0);
        self.len = 0;
    }

    /// Its bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.len <= self.bytes.len() {
            &self.bytes[..self.len]
        } else {
            &self.long
        }
    }

    #[inline]
    fn words(&self) -> [u64; WORDS] {
        std::array::from_fn(|i| {
            u64::from_le_bytes(self.bytes[8 * i..8 * i + 8].try_into().expect("8 bytes"))
        })
    }
}

/// Padded words of `key` (at most `8 * WORDS` bytes).
fn words_of(key: &[u8]) -> [u64; WORDS] {
    let mut t = Token::default();
    for &b in key {
        t.push(b);
    }
    t.words()
}

#[inline]
fn hash(words: &[u64; WORDS], len: usize) -> u64 {
    const K: u64 = 0xf135_7aea_2e62_a9c5;
    let mut h = (len as u64).wrapping_mul(K);
    for &w in words.iter().take(len.div_ceil(8).max(1)) {
        h = (h ^ w).wrapping_mul(K).rotate_left(26);
    }
    h
}

/// One slot: a short key's words, length and value.
#[derive(Clone, Copy)]
struct Slot {
    words: [u64; WORDS],
    /// [`EMPTY`] for a free slot.
    len: u32,
    value: u32,
}

const EMPTY: u32 = u32::MAX;

/// Token → index, for tokens given as [`Token`]s or slices.
#[derive(Clone, Default)]
pub(crate) struct TokenTable {
    /// Open addressing, linear probing.
    slots: Vec<Slot>,
    short: usize,
    long: FxHashMap<Vec<u8>, i64>,
}

impl TokenTable {
    /// A table of `keys` (distinct) to their values.
    /// Values are indices: those above `u32::MAX` go to the plain map.
    pub(crate) fn new(keys: impl IntoIterator<Item = (Vec<u8>, i64)>) -> TokenTable {
        let mut short = Vec::new();
        let mut long = FxHashMap::default();
        for (k, v) in keys {
            match u32::try_from(v) {
                Ok(value) if k.len() <= 8 * WORDS && value != EMPTY => short.push(Slot {
                    words: words_of(&k),
                    len: k.len() as u32,
                    value,
                }),
                _ => {
                    long.insert(k, v);
                }
            }
        }
        // At most 3/4 full.
        let size = (short.len() * 4 / 3 + 1).next_power_of_two().max(16);
        let empty = Slot {
            words: [0; WORDS],
            len: EMPTY,
            value: 0,
        };
        let mut slots = vec![empty; size];
        let mask = size - 1;
        for e in &short {
            let mut s = hash(&e.words, e.len as usize) as usize & mask;
            while slots[s].len != EMPTY {
                s = (s + 1) & mask;
            }
            slots[s] = *e;
        }
        TokenTable {
            slots,
            short: short.len(),
            long,
        }
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.short + self.long.len()
    }

    /// The value of the token being assembled.
    #[inline]
    pub(crate) fn get_token(&self, token: &Token) -> Option<i64> {
        if token.len > 8 * WORDS {
            return self.long.get(token.as_slice()).copied();
        }
        self.get_words(&token.words(), token.len)
    }

    /// The value of `key`.
    pub(crate) fn get(&self, key: &[u8]) -> Option<i64> {
        if key.len() > 8 * WORDS {
            return self.long.get(key).copied();
        }
        self.get_words(&words_of(key), key.len())
    }

    #[inline]
    fn get_words(&self, words: &[u64; WORDS], len: usize) -> Option<i64> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut s = hash(words, len) as usize & mask;
        loop {
            let e = &self.slots[s];
            if e.len == len as u32 && e.words == *words {
                return Some(i64::from(e.value));
            }
            if e.len == EMPTY {
                return None;
            }
            s = (s + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The table answers as a map of the same keys, for tokens short and long, built
        /// byte by byte or given as slices.
        #[test]
        fn answers_as_a_map(
            keys in prop::collection::hash_set(prop::collection::vec(any::<u8>(), 1..48), 0..200),
            probes in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..48), 0..50),
        ) {
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let map: std::collections::HashMap<Vec<u8>, i64> =
                keys.iter().cloned().zip(2..).collect();
            let table = TokenTable::new(map.clone());
            prop_assert_eq!(table.len(), map.len());
            let mut token = Token::default();
            for probe in keys.iter().chain(&probes) {
                token.clear();
                for &b in probe {
                    token.push(b);
                }
                prop_assert_eq!(token.as_slice(), probe.as_slice());
                prop_assert_eq!(table.get_token(&token), map.get(probe).copied());
                prop_assert_eq!(table.get(probe), map.get(probe).copied());
            }
        }
    }

    #[test]
    fn a_zero_byte_is_part_of_the_key() {
        let table = TokenTable::new([(b"a".to_vec(), 2), (b"a\0".to_vec(), 3)]);
        assert_eq!(table.get(b"a"), Some(2));
        assert_eq!(table.get(b"a\0"), Some(3));
        assert_eq!(table.get(b"a\0\0"), None);
    }
}
