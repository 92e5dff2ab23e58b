use super::*;
use proptest::prelude::*;

#[test]
fn rejects_invalid_sizes_with_the_apiservers_messages() {
    let cases: &[(i64, i64, &str)] = &[
        (0, 1, "deckSize 0 or handSize 1 is not positive"),
        (8, -1, "deckSize 8 or handSize -1 is not positive"),
        (4, 5, "handSize 5 is greater than deckSize 4"),
        ((1 << 26) + 1, 1, "deckSize 67108865 is impractically large"),
        (
            128,
            9,
            "required entropy bits of deckSize 128 and handSize 9 is greater than 60",
        ),
    ];
    for (deck, hand, msg) in cases {
        let err = Dealer::new(*deck, *hand).expect_err("invalid sizes");
        assert_eq!(err.to_string(), *msg, "deck {deck} hand {hand}");
    }
    assert!(Dealer::new(128, 8).is_ok());
    assert!(Dealer::new(1 << 26, 2).is_ok());
    assert!(Dealer::new(16, 15).is_ok());
}

#[test]
fn deals_like_the_reference_for_known_hashes() {
    // Worked by hand from the algorithm: deck 8, hand 3, hash 0 → remainders [0,0,0] → cards 0,1,2.
    let d = Dealer::new(8, 3).expect("valid");
    assert_eq!(d.deal(0).as_slice(), &[0, 1, 2]);
    // hash 8*7*6-1 = 335 → remainders [7, 41%7=6, 5%6=5]; card0=7; card1: 6>=7? no → 6;
    // card2: 5 vs r1=6 no, vs r0=7 no → 5.
    assert_eq!(d.deal(335).as_slice(), &[7, 6, 5]);
    // hash 1 → remainders [1,0,0]; card1: 0 >= 1? no → 0; card2: 0>=0 → 1, 1>=1 → 2.
    assert_eq!(d.deal(1).as_slice(), &[1, 0, 2]);
}

#[test]
fn full_hand_is_a_permutation() {
    let d = Dealer::new(6, 6).expect("valid");
    for h in [0u64, 1, 719, 12345, u64::MAX] {
        let mut cards = d.deal(h).as_slice().to_vec();
        cards.sort_unstable();
        assert_eq!(cards, vec![0, 1, 2, 3, 4, 5]);
    }
}

/// A valid `(deck, hand)`: a hand of 1 to 15 cards and a deck from the hand's size up to 4096
/// cards or the largest whose deals fit in 60 bits, whichever is smaller (generated valid rather
/// than filtered, so that no number of cases runs out of proptest's rejects).
fn deck_and_hand() -> impl Strategy<Value = (i64, i64)> {
    (1i64..=15).prop_flat_map(|hand| {
        let max_deck = (hand..=4096)
            .rev()
            .find(|&deck| required_entropy_bits(deck, hand) <= 60)
            .unwrap_or(hand);
        (hand..=max_deck, Just(hand))
    })
}

proptest! {
    #[test]
    fn hands_are_distinct_in_range_and_deterministic((deck, hand) in deck_and_hand(), hash: u64) {
        let d = Dealer::new(deck, hand).expect("valid");
        let first = d.deal(hash);
        prop_assert_eq!(first, d.deal(hash));
        let cards = first.as_slice();
        prop_assert_eq!(cards.len() as i64, hand);
        let mut seen = std::collections::HashSet::new();
        for &c in cards {
            prop_assert!((c as i64) < deck);
            prop_assert!(seen.insert(c));
        }
    }

    #[test]
    fn each_card_alone_is_the_card_of_the_hand((deck, hand) in deck_and_hand(), hash: u64) {
        let d = Dealer::new(deck, hand).expect("valid");
        for (i, &c) in d.deal(hash).as_slice().iter().enumerate() {
            prop_assert_eq!(d.card(hash, i), c, "card {}", i);
        }
    }
}
