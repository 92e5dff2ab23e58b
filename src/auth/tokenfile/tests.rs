use std::path::Path;

use super::*;

fn parse(text: &str) -> Result<TokenFile, TokenFileError> {
    TokenFile::parse(Path::new("/etc/tokens.csv"), text)
}

fn id(user: &str, uid: &str, groups: &[&str]) -> Identity {
    Identity {
        user: user.to_string(),
        uid: uid.to_string(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Identity::default()
    }
}

#[test]
fn parses_users_uids_and_quoted_groups() {
    let file = parse(concat!(
        "token1,user1,uid1\n",
        "token2,user2,uid2,\"group1,group2\"\n",
        "token3,user3,uid3,single,ignored-column\n",
        "token4,user4,uid4,\n",
        "\"tok,en5\",\"user \"\"five\"\"\",uid5\n",
    ))
    .expect("valid file");
    let cases = [
        ("token1", id("user1", "uid1", &[])),
        ("token2", id("user2", "uid2", &["group1", "group2"])),
        ("token3", id("user3", "uid3", &["single"])),
        // Go's strings.Split("", ",") is [""]: an empty fourth column is one empty group.
        ("token4", id("user4", "uid4", &[""])),
        ("tok,en5", id("user \"five\"", "uid5", &[])),
    ];
    for (token, want) in cases {
        assert_eq!(file.authenticate(token), Some(&want), "{token}");
    }
    assert_eq!(file.authenticate("unknown"), None);
    assert_eq!(file.len(), 5);
}

#[test]
fn empty_tokens_are_skipped_and_duplicates_keep_the_last() {
    let file = parse(",nobody,uid0\ndup,first,1\ndup,second,2\n").expect("valid file");
    assert_eq!(file.len(), 1);
    assert_eq!(file.authenticate(""), None);
    assert_eq!(file.authenticate("dup"), Some(&id("second", "2", &[])));
}

#[test]
fn malformed_lines_are_errors_naming_the_line() {
    let cases = [
        (
            "ok,user,uid\n\ntoken,user\n",
            "token file '/etc/tokens.csv' line 3: must have at least 3 columns (token, user name, user uid), found 2",
        ),
        (
            "justatoken",
            "token file '/etc/tokens.csv' line 1: must have at least 3 columns (token, user name, user uid), found 1",
        ),
        (
            "ok,user,uid\nto\"ken,user,uid\n",
            "token file '/etc/tokens.csv': parse error on line 2, column 3: bare \" in non-quoted-field",
        ),
    ];
    for (text, want) in cases {
        let err = parse(text).expect_err("malformed file");
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn loads_from_disk_and_reports_missing_or_non_utf8_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("tokens.csv");
    std::fs::write(&good, "t,u,i\n").expect("write");
    assert_eq!(TokenFile::load(&good).expect("loads").len(), 1);

    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, b"t,u,i\nt2,\xff,i\n").expect("write");
    let err = TokenFile::load(&bad).expect_err("not UTF-8");
    assert!(matches!(err, TokenFileError::Utf8 { line: 2, .. }), "{err}");

    let missing = TokenFile::load(&dir.path().join("absent.csv")).expect_err("missing");
    assert!(matches!(missing, TokenFileError::Read { .. }), "{missing}");
}

#[test]
fn debug_output_never_lists_tokens() {
    let file = parse("supersecret,u,i\n").expect("valid file");
    assert_eq!(format!("{file:?}"), "TokenFile { tokens: 1 }");
}
