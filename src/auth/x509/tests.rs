use super::*;
use crate::auth::test_pki::{ClientSpec, TestCa};

fn bundle(ca: &TestCa) -> CaBundle {
    CaBundle::from_pem(ca.pem().as_bytes()).expect("CA bundle")
}

fn spec(cn: &str) -> ClientSpec<'_> {
    ClientSpec {
        cn: Some(cn),
        ..ClientSpec::default()
    }
}

#[test]
fn verified_certificate_gives_cn_as_user_and_o_as_groups() {
    let ca = TestCa::new("client-ca");
    let chain = ca.client(ClientSpec {
        cn: Some("alice"),
        orgs: &["dev", "ops"],
        uid: Some("uid-123"),
        ..ClientSpec::default()
    });
    let auth = ClientCertAuthenticator::new(bundle(&ca));
    let id = auth
        .authenticate(Some(&chain), UnixTime::now())
        .expect("verifies")
        .expect("has a CN");
    assert_eq!(id.user, "alice");
    assert_eq!(id.uid, "uid-123");
    assert_eq!(id.groups, vec!["dev", "ops"]);
    let fingerprint = hex(&Sha256::digest(chain[0].as_ref()));
    assert_eq!(
        id.extra.get(CREDENTIAL_ID_KEY),
        Some(&vec![format!("X509SHA256={fingerprint}")])
    );
}

#[test]
fn no_certificate_or_empty_cn_is_no_opinion() {
    let ca = TestCa::new("client-ca");
    let auth = ClientCertAuthenticator::new(bundle(&ca));
    assert_eq!(auth.authenticate(None, UnixTime::now()), Ok(None));
    assert_eq!(auth.authenticate(Some(&[]), UnixTime::now()), Ok(None));
    let no_cn = ca.client(ClientSpec {
        orgs: &["dev"],
        ..ClientSpec::default()
    });
    assert_eq!(auth.authenticate(Some(&no_cn), UnixTime::now()), Ok(None));
}

#[test]
fn certificates_that_do_not_verify_are_errors() {
    let ca = TestCa::new("client-ca");
    let other = TestCa::new("other-ca");
    let auth = ClientCertAuthenticator::new(bundle(&ca));
    let cases = [
        ("wrong CA", other.client(spec("mallory"))),
        (
            "expired",
            ca.client(ClientSpec {
                expired: true,
                ..spec("old")
            }),
        ),
        (
            "server auth only",
            ca.client(ClientSpec {
                server_auth_only: true,
                ..spec("server")
            }),
        ),
    ];
    for (name, chain) in cases {
        let err = auth
            .authenticate(Some(&chain), UnixTime::now())
            .expect_err(name);
        let CertError::Verify { id, .. } = &err else {
            panic!("{name}: {err}");
        };
        assert!(id.starts_with("SN="), "{name}: {id}");
        assert!(id.contains("SKID=") && id.contains("AKID="), "{name}: {id}");
    }
}

#[test]
fn uid_attribute_rules_mirror_parse_uid_from_cert() {
    let subject = |uids: Vec<Option<&str>>| Subject {
        common_name: "u".to_string(),
        organizations: Vec::new(),
        uids: uids.into_iter().map(|u| u.map(str::to_string)).collect(),
    };
    let cases = [
        (vec![], Ok(String::new())),
        (vec![Some("abc")], Ok("abc".to_string())),
        (
            vec![Some("")],
            Err(CertError::Uid("UID cannot be an empty string".to_string())),
        ),
        (
            vec![None],
            Err(CertError::Uid(
                "unable to parse UID into a string".to_string(),
            )),
        ),
        (
            vec![Some("a"), Some("b")],
            Err(CertError::Uid(
                "expected 1 UID, but found multiple: [a b]".to_string(),
            )),
        ),
    ];
    for (uids, want) in cases {
        assert_eq!(subject(uids.clone()).uid(), want, "{uids:?}");
    }
}

#[test]
fn bad_ca_bundles_are_rejected() {
    assert!(CaBundle::from_pem(b"").is_err());
    assert!(CaBundle::from_pem(b"not pem at all").is_err());
    let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    assert!(CaBundle::from_pem(garbage.as_bytes()).is_err());
}

#[test]
fn a_bundle_with_several_cas_verifies_each() {
    let a = TestCa::new("a");
    let b = TestCa::new("b");
    let pem = format!("{}{}", a.pem(), b.pem());
    let bundle = CaBundle::from_pem(pem.as_bytes()).expect("bundle");
    assert_eq!(bundle.certs().len(), 2);
    for ca in [&a, &b] {
        bundle
            .verify(&ca.client(spec("x")), UnixTime::now())
            .expect("verifies");
    }
}

#[test]
fn intermediates_sent_by_the_client_complete_the_chain() {
    let root = TestCa::new("root");
    let intermediate = root.intermediate("intermediate");
    let mut chain = intermediate.client(spec("carol"));
    let auth = ClientCertAuthenticator::new(bundle(&root));
    assert!(
        matches!(
            auth.authenticate(Some(&chain), UnixTime::now()),
            Err(CertError::Verify { .. })
        ),
        "leaf alone does not chain to the root"
    );
    chain.push(intermediate.der());
    let id = auth
        .authenticate(Some(&chain), UnixTime::now())
        .expect("verifies through the intermediate")
        .expect("has a CN");
    assert_eq!(id.user, "carol");
}

#[test]
fn a_verified_chain_is_remembered_for_a_minute_at_most() {
    use std::time::Duration;
    let ca = TestCa::new("client-ca");
    let other = TestCa::new("other-ca");
    let bundle = bundle(&ca);
    let chain = ca.client(spec("alice"));
    let t0 = UnixTime::now();
    let at = |secs: u64| UnixTime::since_unix_epoch(Duration::from_secs(t0.as_secs() + secs));
    bundle.verify(&chain, t0).expect("verifies");
    assert!(bundle.current().verified.get(&chain, at(59)).is_some());
    assert!(
        bundle.current().verified.get(&chain, at(60)).is_none(),
        "re-verified after the TTL"
    );
    bundle.verify(&chain, at(60)).expect("still valid");
    assert_eq!(bundle.current().verified.len(), 1);
    // A chain from another CA stays unknown: remembered for the same minute, with its error.
    let stranger = other.client(spec("m"));
    let error = bundle.verify(&stranger, t0).expect_err("unknown issuer");
    assert_eq!(bundle.current().verified.len(), 2);
    assert!(matches!(
        bundle.current().verified.get(&stranger, at(59)),
        Some(Err(remembered)) if remembered == error
    ));
    assert!(bundle.current().verified.get(&stranger, at(60)).is_none());
}

#[test]
fn failures_that_time_or_usage_explain_are_not_remembered() {
    let ca = TestCa::new("client-ca");
    let bundle = bundle(&ca);
    let expired = ca.client(ClientSpec {
        expired: true,
        ..spec("old")
    });
    let server_only = ca.client(ClientSpec {
        server_auth_only: true,
        ..spec("server")
    });
    for chain in [expired, server_only] {
        assert!(bundle.verify(&chain, UnixTime::now()).is_err());
    }
    assert_eq!(bundle.current().verified.len(), 0);
}

#[test]
fn a_remembered_chain_is_not_trusted_past_its_not_after() {
    use std::time::Duration;
    let ca = TestCa::new("client-ca");
    let bundle = bundle(&ca);
    let chain = ca.client(spec("alice"));
    let (_, cert) = X509Certificate::from_der(&chain[0]).expect("parses");
    let not_after = u64::try_from(cert.validity().not_after.timestamp()).expect("after 1970");
    let at = |secs: u64| UnixTime::since_unix_epoch(Duration::from_secs(secs));
    bundle
        .verify(&chain, at(not_after - 30))
        .expect("valid until notAfter");
    assert!(bundle
        .current()
        .verified
        .get(&chain, at(not_after - 1))
        .is_some());
    assert!(bundle
        .current()
        .verified
        .get(&chain, at(not_after))
        .is_none());
}

#[test]
fn a_reloaded_bundle_trusts_the_new_ca_and_a_bad_file_keeps_the_last_good_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (old_ca, new_ca) = (TestCa::new("old-ca"), TestCa::new("new-ca"));
    let path = old_ca.write(dir.path(), "ca.crt");
    let bundle = CaBundle::load("--client-ca-file", &path).expect("loads");
    let (old_cert, new_cert) = (old_ca.client(spec("old")), new_ca.client(spec("new")));
    let now = UnixTime::now();
    assert!(bundle.verify(&old_cert, now).is_ok());
    assert!(!bundle.reload().expect("same file"), "nothing changed");

    new_ca.write(dir.path(), "ca.crt");
    assert!(bundle.reload().expect("new CA"), "changed");
    assert!(bundle.verify(&new_cert, now).is_ok());
    assert!(
        bundle.verify(&old_cert, now).is_err(),
        "the old CA's verified-chain cache went with it"
    );
    assert_eq!(bundle.certs(), vec![new_ca.der()]);

    std::fs::write(&path, "-----BEGIN CERTIFICATE-----\ngarbage\n").expect("corrupt");
    let error = bundle.reload().expect_err("refused");
    assert!(error.to_string().contains("--client-ca-file"), "{error}");
    assert!(
        bundle.verify(&new_cert, now).is_ok(),
        "the last good set stays"
    );
    std::fs::remove_file(&path).expect("remove");
    assert!(bundle.reload().is_err());
    assert!(bundle.verify(&new_cert, now).is_ok());
}

#[test]
fn a_remembered_chain_answers_as_a_fresh_verification_does() {
    let ca = TestCa::new("client-ca");
    let chain = ca.client(ClientSpec {
        cn: Some("alice"),
        orgs: &["dev"],
        uid: Some("uid-1"),
        ..ClientSpec::default()
    });
    let auth = ClientCertAuthenticator::new(bundle(&ca));
    let now = UnixTime::now();
    let first = auth.authenticate(Some(&chain), now).expect("verifies");
    assert_eq!(auth.ca().current().verified.len(), 1);
    let again = auth.authenticate(Some(&chain), now).expect("remembered");
    assert_eq!(first, again);
}

#[test]
fn a_chain_differing_from_a_remembered_one_outside_the_sampled_bytes_is_verified_afresh() {
    // The lookup hashes each certificate's length and last bytes; a chain equal there but not
    // elsewhere lands on the remembered entry's bucket and must not be taken for it.
    let ca = TestCa::new("client-ca");
    let bundle = bundle(&ca);
    let chain = ca.client(spec("alice"));
    let now = UnixTime::now();
    bundle.verify(&chain, now).expect("verifies");
    let mut forged = chain[0].as_ref().to_vec();
    let middle = forged.len() / 2;
    forged[middle] ^= 0x01;
    let forged = vec![CertificateDer::from(forged)];
    assert!(
        bundle.verify(&forged, now).is_err(),
        "a tampered chain fails"
    );
    assert_eq!(bundle.current().verified.len(), 1);
}

#[test]
fn chains_padded_past_the_size_limit_are_not_kept() {
    let ca = TestCa::new("client-ca");
    let bundle = bundle(&ca);
    let mut chain = ca.client(spec("alice"));
    let leaf = Arc::new(VerifiedLeaf::read(&chain[0]));
    // Certificates a client may append to its chain without needing them.
    while chain.iter().map(|c| c.len()).sum::<usize>() <= 16 << 10 {
        chain.push(ca.der());
    }
    let set = bundle.current();
    set.verified
        .insert_verified(&chain, UnixTime::now(), Arc::clone(&leaf));
    assert_eq!(set.verified.len(), 0);
    set.verified
        .insert_verified(&chain[..1], UnixTime::now(), leaf);
    assert_eq!(set.verified.len(), 1);
}
