//! Shuffle sharding: the hand of queues a flow is dealt.
//!
//! Mirrors `k8s.io/apiserver/pkg/util/shufflesharding/shufflesharding.go`: the same validity rules,
//! error messages and deal order, so a flow lands on the queues the apiserver would give it.

/// The most hash bits a deal may consume.
pub const MAX_HASH_BITS: u32 = 60;

/// The largest hand the entropy limit allows (`handSize` 15 with a deck of 16).
const MAX_HAND_SIZE: usize = 15;

/// Why a deck and hand size cannot be dealt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DealerError {
    #[error("deckSize {0} or handSize {1} is not positive")]
    NotPositive(i64, i64),
    #[error("handSize {1} is greater than deckSize {0}")]
    HandTooLarge(i64, i64),
    #[error("deckSize {0} is impractically large")]
    DeckTooLarge(i64),
    #[error("required entropy bits of deckSize {0} and handSize {1} is greater than 60")]
    TooMuchEntropy(i64, i64),
}

/// `ceil(log2(deck_size) × hand_size)`, as the apiserver computes it (in floating point).
pub fn required_entropy_bits(deck_size: i64, hand_size: i64) -> i64 {
    ((deck_size as f64).log2() * hand_size as f64).ceil() as i64
}

/// Deals hands of `hand_size` distinct cards from a deck of `deck_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dealer {
    deck_size: usize,
    hand_size: usize,
}

impl Dealer {
    /// A dealer, if `1 ≤ hand_size ≤ deck_size ≤ 2^26` and the hand needs at most 60 hash bits.
    pub fn new(deck_size: i64, hand_size: i64) -> Result<Dealer, DealerError> {
        if deck_size <= 0 || hand_size <= 0 {
            return Err(DealerError::NotPositive(deck_size, hand_size));
        }
        if hand_size > deck_size {
            return Err(DealerError::HandTooLarge(deck_size, hand_size));
        }
        if deck_size > 1 << 26 {
            return Err(DealerError::DeckTooLarge(deck_size));
        }
        if required_entropy_bits(deck_size, hand_size) > i64::from(MAX_HASH_BITS) {
            return Err(DealerError::TooMuchEntropy(deck_size, hand_size));
        }
        // Both bounds were just checked: deck ≤ 2^26 and hand ≤ 15 (entropy ≤ 60 bits).
        Ok(Dealer {
            deck_size: deck_size as usize,
            hand_size: hand_size as usize,
        })
    }

    /// The number of queues in the deck.
    pub fn deck_size(&self) -> usize {
        self.deck_size
    }

    /// The number of cards in a hand.
    pub fn hand_size(&self) -> usize {
        self.hand_size
    }

    /// The hand for `hash`: `hand_size` distinct cards in `[0, deck_size)`, in deal order.
    pub fn deal(&self, mut hash: u64) -> Hand {
        let mut remainders = [0usize; MAX_HAND_SIZE];
        for (i, r) in remainders.iter_mut().take(self.hand_size).enumerate() {
            let modulus = (self.deck_size - i) as u64;
            *r = (hash % modulus) as usize;
            hash /= modulus;
        }
        let mut cards = [0usize; MAX_HAND_SIZE];
        for i in 0..self.hand_size {
            // Compare against the raw remainders, newest first: each earlier card that is not
            // above this one shifts it up by one, which makes the cards distinct.
            let mut card = remainders[i];
            for j in (1..=i).rev() {
                if card >= remainders[j - 1] {
                    card += 1;
                }
            }
            cards[i] = card;
        }
        Hand {
            cards,
            len: self.hand_size,
        }
    }
}

impl Dealer {
    /// The card at `index` (below the hand size) of the hand for `hash`:
    /// `deal(hash).as_slice()[index]`, without dealing the cards after it.
    pub fn card(&self, mut hash: u64, index: usize) -> usize {
        let index = index.min(self.hand_size - 1);
        let mut remainders = [0usize; MAX_HAND_SIZE];
        for (i, r) in remainders.iter_mut().take(index + 1).enumerate() {
            let modulus = (self.deck_size - i) as u64;
            *r = (hash % modulus) as usize;
            hash /= modulus;
        }
        // As in `deal`: each earlier card that is not above this one shifts it up by one.
        let mut card = remainders[index];
        for j in (1..=index).rev() {
            if card >= remainders[j - 1] {
                card += 1;
            }
        }
        card
    }
}

/// A dealt hand: queue indices in deal order. Small and `Copy`; no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hand {
    cards: [usize; MAX_HAND_SIZE],
    len: usize,
}

impl Hand {
    /// The cards in deal order.
    pub fn as_slice(&self) -> &[usize] {
        &self.cards[..self.len]
    }
}

#[cfg(test)]
mod tests;
