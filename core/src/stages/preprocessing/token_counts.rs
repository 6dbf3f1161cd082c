//! How often each token was seen, in bounded memory when asked: what `adapt`'s vocabulary
//! analyzers count with.
//!
//! Without a capacity every distinct token is held (exact, memory O(distinct tokens)).
//! With `capacity = k`, at most `k` tokens are held (Misra-Gries): a token not held when
//! `k` are is counted by taking one from every held token (dropping those at 0) instead.
//! While the input has at most `k` distinct tokens nothing is ever dropped and the counts
//! are exact; past that, each count is low by at most `n / (k + 1)` (`n` tokens seen), and
//! every token seen more than `n / (k + 1)` times is held: the most frequent tokens, a
//! vocabulary's, are found in `k` entries of memory.

use rustc_hash::FxHashMap;

/// Token counts, exact or bounded (see the module).
#[derive(Debug, Clone, Default)]
pub struct TokenCounts {
    counts: FxHashMap<Box<[u8]>, u64>,
    capacity: Option<usize>,
    /// Tokens seen.
    seen: u64,
    /// Whether a decrement happened (the counts are then approximate).
    approximate: bool,
    /// The most tokens held at once.
    peak: usize,
}

impl TokenCounts {
    /// Counts holding at most `capacity` tokens (`None`: every token, exact).
    pub fn new(capacity: Option<usize>) -> Self {
        TokenCounts {
            capacity: capacity.map(|c| c.max(1)),
            ..TokenCounts::default()
        }
    }

    /// Counts `token` once.
    pub fn add(&mut self, token: &[u8]) {
        self.seen += 1;
        if let Some(c) = self.counts.get_mut(token) {
            *c += 1;
            return;
        }
        match self.capacity {
            Some(k) if self.counts.len() >= k => {
                // Misra-Gries: the new token and one of each held token cancel out.
                self.approximate = true;
                self.counts.retain(|_, c| {
                    *c -= 1;
                    *c > 0
                });
            }
            _ => {
                self.counts.insert(token.into(), 1);
                self.peak = self.peak.max(self.counts.len());
            }
        }
    }

    /// Tokens held now.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no token is held.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The most tokens held at once so far (at most the capacity).
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Tokens seen (every [`add`](TokenCounts::add)).
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Whether tokens were dropped: the counts are then lower bounds, low by at most
    /// `seen / (capacity + 1)`.
    pub fn is_approximate(&self) -> bool {
        self.approximate
    }

    /// The count of `token` (0 when not held).
    pub fn get(&self, token: &[u8]) -> u64 {
        self.counts.get(token).copied().unwrap_or(0)
    }

    /// The tokens held and their counts, in no order.
    pub fn into_counts(self) -> Vec<(Vec<u8>, u64)> {
        self.counts
            .into_iter()
            .map(|(t, c)| (t.into_vec(), c))
            .collect()
    }
}
