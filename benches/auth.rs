//! Per-request authentication cost through the public API: anonymous, token file, a TokenReview
//! cache hit, a client certificate and a front-proxy request.

use std::sync::Arc;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use futures_util::future::{BoxFuture, FutureExt};
use http::{HeaderMap, HeaderValue, StatusCode};
use kube_apf_proxy::auth::{
    AuthConfig, Authenticator, RequestHeaderConfig, TokenReviewConfig, TokenReviewTransport,
    TransportError,
};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls_pki_types::CertificateDer;

struct Accept;

impl TokenReviewTransport for Accept {
    fn review(
        &self,
        _body: Bytes,
    ) -> BoxFuture<'static, Result<(StatusCode, Bytes), TransportError>> {
        let body =
            r#"{"status":{"authenticated":true,"user":{"username":"reviewed","groups":["g"]}}}"#;
        async move { Ok((StatusCode::CREATED, Bytes::from_static(body.as_bytes()))) }.boxed()
    }
}

struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("CA");
    Ca { cert, key }
}

fn leaf(ca: &Ca, cn: &str) -> Vec<CertificateDer<'static>> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    params
        .distinguished_name
        .push(DnType::OrganizationName, "dev");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().expect("key");
    vec![params
        .signed_by(&key, &ca.cert, &ca.key)
        .expect("leaf")
        .der()
        .clone()]
}

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                http::HeaderName::from_static(k),
                HeaderValue::from_static(v),
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client_ca, proxy_ca) = (ca("client-ca"), ca("proxy-ca"));
    let write = |name: &str, pem: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).expect("write");
        path
    };
    let cfg = AuthConfig {
        client_ca_file: Some(write("client.pem", client_ca.cert.pem())),
        token_auth_file: Some(write(
            "tokens.csv",
            "filetoken,file-user,1,\"a,b\"\n".to_string(),
        )),
        token_review: Some(TokenReviewConfig::new(Arc::new(Accept))),
        request_header: Some(RequestHeaderConfig::new(write(
            "proxy.pem",
            proxy_ca.cert.pem(),
        ))),
        ..AuthConfig::default()
    };
    let auth = Authenticator::new(cfg).expect("config");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client_chain = leaf(&client_ca, "alice");
    let proxy_chain = leaf(&proxy_ca, "front-proxy");
    let cases: Vec<(&str, HeaderMap, Option<&[CertificateDer<'static>]>)> = vec![
        ("anonymous", HeaderMap::new(), None),
        (
            "token_file",
            headers(&[("authorization", "Bearer filetoken")]),
            None,
        ),
        (
            "token_review_cache_hit",
            headers(&[("authorization", "Bearer reviewed")]),
            None,
        ),
        ("client_certificate", HeaderMap::new(), Some(&client_chain)),
        (
            "requestheader",
            headers(&[("x-remote-user", "bob"), ("x-remote-group", "g")]),
            Some(&proxy_chain),
        ),
    ];
    let mut group = c.benchmark_group("authenticate");
    for (name, h, certs) in &cases {
        runtime
            .block_on(auth.authenticate(h, *certs))
            .expect("authenticates");
        group.bench_function(*name, |b| {
            b.iter(|| runtime.block_on(auth.authenticate(h, *certs)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
