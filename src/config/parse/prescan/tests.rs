use super::*;

fn depth(text: &str) -> usize {
    prescan(text, MAX_TOKENS).expect("accepted").depth
}

fn refused(text: &str) -> PrescanError {
    prescan(text, MAX_TOKENS).expect_err("refused")
}

#[test]
fn refuses_deep_flow_nesting_before_parsing() {
    assert_eq!(
        refused(&"[".repeat(500_000)),
        PrescanError::TooDeep { line: 1 }
    );
    assert_eq!(
        refused(&"{a: ".repeat(200)),
        PrescanError::TooDeep { line: 1 }
    );
    let mut json = String::from("{\"kind\":\n");
    json.push_str(&"[".repeat(MAX_DEPTH));
    assert_eq!(refused(&json), PrescanError::TooDeep { line: 2 });
}

#[test]
fn refuses_deep_block_nesting_before_parsing() {
    assert!(matches!(
        refused(&"- ".repeat(300_000)),
        PrescanError::TooDeep { .. }
    ));
    let stairs: String = (0..100)
        .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
        .collect();
    assert!(matches!(refused(&stairs), PrescanError::TooDeep { .. }));
}

#[test]
fn brackets_in_quotes_comments_plain_and_block_scalars_do_not_nest() {
    let text = "a: \"[[[[\" # [[[[\nb: '[[[['\nc: x[[[[\nd: |\n  [[[[\n  {{{{\ne: >-\n  [[[[\nf: [\"]]\", ']']\n";
    let opened = "[[[[".repeat(40);
    let text = text.replace("[[[[", &opened);
    assert!(depth(&text) < 8, "{}", depth(&text));
}

#[test]
fn closing_brackets_inside_quotes_do_not_hide_opening_ones() {
    let attack = "[\"]\", ".repeat(200);
    assert!(matches!(refused(&attack), PrescanError::TooDeep { .. }));
    let attack = "['a'']', ".repeat(200);
    assert!(matches!(refused(&attack), PrescanError::TooDeep { .. }));
}

#[test]
fn the_embedded_configuration_is_shallow_and_small() {
    let shape = prescan(crate::config::BOOTSTRAP_YAML, MAX_TOKENS).expect("accepted");
    assert!(shape.depth <= 24, "{shape:?}");
    assert!(shape.tokens < 2_000, "{shape:?}");
}

#[test]
fn refuses_too_many_tokens_whatever_the_quoting() {
    let flat = format!("[{}]", "a,".repeat(MAX_TOKENS));
    assert_eq!(
        refused(&flat),
        PrescanError::TooManyTokens { limit: MAX_TOKENS }
    );
    // Quotes cannot hide tokens: they are counted regardless.
    let quoted = format!("\"{}\"", ",".repeat(MAX_TOKENS + 1));
    assert_eq!(
        refused(&quoted),
        PrescanError::TooManyTokens { limit: MAX_TOKENS }
    );
    assert!(prescan(&"a,".repeat(100), MAX_TOKENS).is_ok());
}

#[test]
fn a_sequence_at_its_mappings_indentation_counts_as_a_level() {
    assert_eq!(depth("a:\n- b\n- c\n"), 4);
}
