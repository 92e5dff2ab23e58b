//! Test PKI made at run time, TLS clients, and a server started on 127.0.0.1:0.

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kube_apf_proxy::server::{
    build_server_tls, full_body, shutdown_channel, ConnectionInfo, ConnectionLimits, Handler,
    ProxyBody, SecureServer, ServerStats, ShutdownTrigger, TlsSettings,
};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A certificate authority that signs serving and client certificates.
pub struct Ca {
    pub cert: rcgen::Certificate,
    key: KeyPair,
}

/// A signed certificate with its key.
pub struct Leaf {
    pub cert: CertificateDer<'static>,
    pub cert_pem: String,
    pub key_pem: String,
    key_der: Vec<u8>,
}

impl Leaf {
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivatePkcs8KeyDer::from(self.key_der.clone()).into()
    }
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("CA");
        Self { cert, key }
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    fn sign(&self, names: &[&str], cn: &str, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let key = KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.cert, &self.key).expect("leaf");
        Leaf {
            cert: cert.der().clone(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
        }
    }

    pub fn server_cert(&self) -> Leaf {
        self.sign(
            &["localhost", "127.0.0.1"],
            "kube-apf-proxy",
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    pub fn client_cert(&self, cn: &str) -> Leaf {
        self.sign(&[], cn, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

/// A handler that answers `<version> <path> <peer certificates> <remote port>`.
pub fn echo_handler() -> Arc<dyn Handler> {
    Arc::new(|request: Request<Incoming>| async move {
        let info = request.extensions().get::<ConnectionInfo>().cloned();
        let peers = info
            .as_ref()
            .and_then(|i| i.peer_certificates.as_ref())
            .map_or(0, |c| c.len());
        let port = info.map_or(0, |i| i.remote_addr.port());
        let body = format!(
            "{:?} {} peers={peers} port={port}",
            request.version(),
            request.uri().path()
        );
        Response::new(full_body(body))
    })
}

/// A running secure server.
pub struct TestServer {
    pub addr: SocketAddr,
    pub stats: Arc<ServerStats>,
    pub trigger: ShutdownTrigger,
    pub task: JoinHandle<()>,
    /// The certificate clients trust.
    pub trust: CertificateDer<'static>,
}

/// Starts a server with a self-signed certificate unless `settings` names files.
pub async fn start(
    settings: TlsSettings,
    limits: ConnectionLimits,
    handler: Arc<dyn Handler>,
    trust: Option<CertificateDer<'static>>,
) -> TestServer {
    let tls = build_server_tls(&settings).expect("TLS config");
    let trust = trust
        .or(tls.self_signed_cert.clone())
        .expect("a certificate to trust");
    let server = SecureServer::bind_loopback(tls.config, limits)
        .await
        .expect("bind");
    let addr = server.local_addr();
    let stats = server.stats();
    let (trigger, signal) = shutdown_channel();
    let task = tokio::spawn(server.serve(handler, signal));
    TestServer {
        addr,
        stats,
        trigger,
        task,
        trust,
    }
}

pub fn settings() -> TlsSettings {
    TlsSettings {
        cert_file: None,
        key_file: None,
        min_version: kube_apf_proxy::server::tls::TlsMinVersion::Tls12,
        cipher_suites: Vec::new(),
        client_ca_roots: Vec::new(),
    }
}

/// A client certificate offered through a resolver that records the CA names of each
/// certificate request; [`Presenting::with_key_of`] pairs a certificate with a key that is not
/// its own (rustls' own client configuration refuses that).
#[derive(Debug)]
pub struct Presenting {
    key: Arc<rustls::sign::CertifiedKey>,
    hints: Mutex<Vec<Vec<Vec<u8>>>>,
}

impl Presenting {
    /// Presents `leaf` with its own key.
    pub fn new(leaf: &Leaf) -> Arc<Self> {
        Self::with_key_of(leaf, leaf)
    }

    /// Presents `leaf`'s certificate but signs the handshake with `signer`'s key.
    pub fn with_key_of(leaf: &Leaf, signer: &Leaf) -> Arc<Self> {
        let key = rustls::crypto::ring::default_provider()
            .key_provider
            .load_private_key(signer.key())
            .expect("signing key");
        Arc::new(Presenting {
            key: Arc::new(rustls::sign::CertifiedKey::new(
                vec![leaf.cert.clone()],
                key,
            )),
            hints: Mutex::new(Vec::new()),
        })
    }

    /// The CA names (DER subjects) of every certificate request so far, one list per request.
    pub fn hints(&self) -> Vec<Vec<Vec<u8>>> {
        self.hints.lock().clone()
    }
}

impl rustls::client::ResolvesClientCert for Presenting {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let hints = root_hint_subjects.iter().map(|h| h.to_vec()).collect();
        self.hints.lock().push(hints);
        Some(self.key.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// How a test client connects.
pub struct ClientOptions {
    pub alpn: Vec<&'static [u8]>,
    pub client_cert: Option<(CertificateDer<'static>, PrivateKeyDer<'static>)>,
    /// Presents a certificate through this resolver (instead of `client_cert`).
    pub presenting: Option<Arc<Presenting>>,
    pub versions: &'static [&'static rustls::SupportedProtocolVersion],
    pub suites: Option<Vec<rustls::SupportedCipherSuite>>,
    pub server_name: &'static str,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            alpn: vec![b"h2", b"http/1.1"],
            client_cert: None,
            presenting: None,
            versions: rustls::ALL_VERSIONS,
            suites: None,
            server_name: "localhost",
        }
    }
}

/// Connects with TLS, trusting `trust`.
pub async fn connect(
    addr: SocketAddr,
    trust: &CertificateDer<'static>,
    options: ClientOptions,
) -> std::io::Result<TlsStream<TcpStream>> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(suites) = options.suites {
        provider.cipher_suites = suites;
    }
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trust.clone()).expect("trust anchor");
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(options.versions)
        .expect("versions")
        .with_root_certificates(roots);
    let mut config = match (options.presenting, options.client_cert) {
        (Some(presenting), _) => builder.with_client_cert_resolver(presenting),
        (None, Some((cert, key))) => builder
            .with_client_auth_cert(vec![cert], key)
            .expect("client cert"),
        (None, None) => builder.with_no_client_auth(),
    };
    config.alpn_protocols = options.alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(options.server_name)
        .expect("server name")
        .to_owned();
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

/// Sends one GET over a fresh connection with the negotiated protocol; returns status and body.
pub async fn get(
    stream: TlsStream<TcpStream>,
    path: &str,
) -> Result<(http::Version, http::StatusCode, String), hyper::Error> {
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(stream);
    let request = Request::get(format!("https://localhost{path}"))
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = if h2 {
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await?;
        tokio::spawn(conn);
        sender.send_request(request).await?
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await?;
        tokio::spawn(conn);
        let mut request = request;
        request.headers_mut().insert(
            http::header::HOST,
            http::HeaderValue::from_static("localhost"),
        );
        *request.uri_mut() = http::Uri::from_static("/");
        if path != "/" {
            *request.uri_mut() = path.parse().expect("path");
        }
        sender.send_request(request).await?
    };
    read(response).await
}

pub async fn read(
    response: Response<Incoming>,
) -> Result<(http::Version, http::StatusCode, String), hyper::Error> {
    let version = response.version();
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((version, status, String::from_utf8_lossy(&body).into_owned()))
}

/// A response with a plain-text body.
pub fn text(body: &'static str) -> Response<ProxyBody> {
    Response::new(full_body(body))
}
