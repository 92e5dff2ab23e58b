use proptest::prelude::*;

use super::*;

/// `query_pairs` as it was written with `str` patterns: the oracle of the byte scan.
fn query_pairs_by_patterns(raw_query: &str) -> Vec<(Vec<u8>, &str)> {
    let too_many = raw_query.bytes().filter(|&b| b == b'&').count() + 1 > MAX_QUERY_PARAMS;
    raw_query
        .split('&')
        .filter(move |piece| !too_many && !piece.is_empty() && !piece.contains(';'))
        .filter_map(|piece| {
            let (key, value) = piece.split_once('=').unwrap_or((piece, ""));
            let key = unescape(key.as_bytes(), Mode::QueryComponent).ok()?;
            Some((key.into_owned(), value))
        })
        .collect()
}

fn scanned(query: &str) -> Vec<(Vec<u8>, &str)> {
    query_pairs(query)
        .map(|(key, value)| (key.into_owned(), value))
        .collect()
}

#[test]
fn query_pairs_over_the_parameter_limit_are_none() {
    let query = "a=1&".repeat(MAX_QUERY_PARAMS);
    assert_eq!(scanned(&query), query_pairs_by_patterns(&query));
    assert!(scanned(&query).is_empty());
    let query = "a=1&".repeat(MAX_QUERY_PARAMS - 1);
    assert_eq!(scanned(&query).len(), MAX_QUERY_PARAMS - 1);
}

proptest! {
    #[test]
    fn query_pairs_scan_bytes_as_the_patterns_split(
        pieces in proptest::collection::vec("[a=;&%+é0-9A-F]{0,6}", 0..10)
    ) {
        let query = pieces.join("&");
        prop_assert_eq!(scanned(&query), query_pairs_by_patterns(&query));
    }
}
