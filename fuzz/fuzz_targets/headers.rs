//! Header handling and identity extraction: front-proxy identity headers read by the
//! authenticator (the requestheader authenticator behind a verified front-proxy certificate,
//! then anonymous), and the headers prepared for the upstream in every forwarding mode.
//!
//! Input: the first byte says whether the front-proxy certificate is presented; the rest is
//! `name: value` lines. Invariants: nothing panics; whatever the caller sent, the upstream sees
//! exactly the authenticated identity in the headers of the mode (one `Impersonate-User` /
//! `X-Remote-User`, the caller's own never), no caller `X-Remote-*` in passthrough, and no
//! caller credential where the proxy speaks for the caller.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;

use http::{HeaderMap, HeaderName, HeaderValue};
use kube_apf_proxy::auth::{AuthConfig, Authenticator, RequestHeaderConfig};
use kube_apf_proxy::proxy::{
    prepare_request_headers, ForgeableHeaders, ForwardableIdentity, IdentityForwarding,
};
use libfuzzer_sys::fuzz_target;
use rustls_pki_types::CertificateDer;

struct World {
    authenticator: Authenticator,
    front_proxy: Vec<CertificateDer<'static>>,
    runtime: tokio::runtime::Runtime,
    forgeable: ForgeableHeaders,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::new()).expect("CA params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "front-proxy-ca");
        let ca = ca_params.self_signed(&ca_key).expect("CA");
        let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
        let mut leaf_params = rcgen::CertificateParams::new(Vec::new()).expect("leaf params");
        leaf_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "front-proxy");
        leaf_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let leaf = leaf_params
            .signed_by(&leaf_key, &ca, &ca_key)
            .expect("leaf");
        let dir = tempfile::tempdir().expect("tempdir").keep();
        let ca_file = dir.join("front-proxy-ca.crt");
        std::fs::write(&ca_file, ca.pem()).expect("write CA");
        let mut request_header = RequestHeaderConfig::new(&ca_file);
        request_header.allowed_names = vec!["front-proxy".to_string()];
        request_header.uid_headers = vec!["X-Remote-Uid".to_string()];
        let forgeable = ForgeableHeaders::new(
            &[
                "X-Remote-User".to_string(),
                "X-Remote-Uid".to_string(),
                "X-Remote-Group".to_string(),
            ],
            &["X-Remote-Extra-".to_string()],
        );
        let config = AuthConfig {
            request_header: Some(request_header),
            anonymous: true,
            ..AuthConfig::default()
        };
        World {
            authenticator: Authenticator::new(config).expect("authenticator"),
            front_proxy: vec![leaf.der().clone()],
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime"),
            forgeable,
        }
    })
}

fn headers_of(bytes: &[u8]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for line in bytes.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        {
            headers.append(name, value);
        }
    }
    headers
}

fn values(headers: &HeaderMap, name: &str) -> Vec<Vec<u8>> {
    headers
        .get_all(name)
        .iter()
        .map(|v| v.as_bytes().to_vec())
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let world = world();
    let headers = headers_of(rest);
    let chain = (selector % 2 == 1).then_some(world.front_proxy.as_slice());
    let result = world
        .runtime
        .block_on(world.authenticator.authenticate(&headers, chain));
    let Ok(authenticated) = result else {
        return;
    };
    let identity = authenticated.identity;
    let peer = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let user_header = HeaderValue::from_bytes(identity.user.as_bytes()).ok();
    for mode in [
        IdentityForwarding::Passthrough,
        IdentityForwarding::Impersonate,
        IdentityForwarding::Requestheader,
    ] {
        let mut out = headers.clone();
        // An identity that cannot travel unchanged is refused whole; one that is accepted is
        // always encoded, its user included.
        let Ok(checked) = ForwardableIdentity::check(identity.clone(), mode) else {
            assert_ne!(mode, IdentityForwarding::Passthrough, "passthrough refuses nothing");
            continue;
        };
        prepare_request_headers(&mut out, &checked, &world.forgeable, peer, false)
            .expect("a checked identity is encoded");
        let ours = match mode {
            IdentityForwarding::Passthrough => None,
            IdentityForwarding::Impersonate => Some("impersonate-"),
            IdentityForwarding::Requestheader => Some("x-remote-"),
        };
        if let Some(prefix) = ours {
            let mut added = out.iter().filter(|(k, _)| k.as_str().starts_with(prefix));
            assert!(
                added.all(|(_, v)| !v.is_empty()),
                "no empty identity header is sent"
            );
        }
        let remote: Vec<&HeaderName> = out
            .keys()
            .filter(|k| k.as_str().starts_with("x-remote-"))
            .collect();
        match mode {
            IdentityForwarding::Passthrough => {
                assert!(remote.is_empty(), "caller's {remote:?} passed through");
            }
            IdentityForwarding::Impersonate => {
                assert!(out.get("authorization").is_none(), "caller credential kept");
                let user = user_header.as_ref().expect("a checked user is a header value");
                assert_eq!(values(&out, "impersonate-user"), [user.as_bytes().to_vec()]);
            }
            IdentityForwarding::Requestheader => {
                assert!(out.get("authorization").is_none(), "caller credential kept");
                let user = user_header.as_ref().expect("a checked user is a header value");
                assert_eq!(values(&out, "x-remote-user"), [user.as_bytes().to_vec()]);
                assert!(
                    out.keys().all(|k| !k.as_str().starts_with("impersonate-")
                        || headers.contains_key(k)),
                    "no impersonation invented"
                );
            }
        }
    }
});
