//! Where the upstream is and how the proxy proves itself to it.
//!
//! Sources, in order: a kubeconfig (`--kubeconfig`, its current context); else, without
//! `--upstream`, the in-cluster service account (`KUBERNETES_SERVICE_HOST`/`_PORT` and
//! `/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}`, as client-go's
//! `rest.InClusterConfig`). The `--upstream*` flags then override field by field (as kubectl's
//! `--server`, `--certificate-authority`, ... override a kubeconfig).

use std::path::{Path, PathBuf};

use http::Uri;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::exec_credential::ExecPlugin;
use super::kubeconfig::{Kubeconfig, KubeconfigContext, KubeconfigError, PemSource};

/// The service account directory of a pod.
pub const IN_CLUSTER_SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Largest PEM or token file the proxy reads (a CA bundle of a few hundred certificates fits).
pub(crate) const MAX_CREDENTIAL_FILE_BYTES: u64 = 1024 * 1024;

/// The upstream flags as plain values (the command line maps its flags onto this).
#[derive(Debug, Clone, Default)]
pub struct UpstreamConfig {
    /// `--upstream`: an `https://` or `http://` URL (a path prefix is kept).
    pub upstream: Option<String>,
    /// `--upstream-ca-file`.
    pub ca_file: Option<PathBuf>,
    /// `--upstream-client-cert-file`.
    pub client_cert_file: Option<PathBuf>,
    /// `--upstream-client-key-file`.
    pub client_key_file: Option<PathBuf>,
    /// `--upstream-token-file` (re-read as it changes).
    pub token_file: Option<PathBuf>,
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
}

/// Why the upstream configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamConfigError {
    /// The kubeconfig is unusable.
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    /// Neither flags, a kubeconfig nor the in-cluster environment name an upstream.
    #[error("no upstream: set --upstream or --kubeconfig, or run in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set)")]
    NoUpstream,
    /// The server URL is not an absolute http(s) URL.
    #[error("invalid upstream URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A file a flag named cannot be read or is too large.
    #[error("{flag} {}: cannot read: {reason}", path.display())]
    FlagFile {
        /// The flag.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A file cannot be read or is too large.
    #[error("reading {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// PEM material holds no certificate or key.
    #[error("{what}: {reason}")]
    Pem {
        /// Which material.
        what: String,
        /// Why.
        reason: String,
    },
    /// A client certificate without key, or the other way round.
    #[error("a client certificate needs its key and a key its certificate")]
    IncompleteClientIdentity,
    /// The TLS client configuration is refused by rustls.
    #[error("upstream TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// A client certificate chain and its key.
#[derive(Debug)]
pub struct ClientIdentity {
    /// The chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key.
    pub key: PrivateKeyDer<'static>,
}

impl Clone for ClientIdentity {
    fn clone(&self) -> Self {
        ClientIdentity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// The proxy's own bearer credential.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// No bearer token.
    None,
    /// A fixed token.
    Token(String),
    /// A token file, re-read periodically (tokens rotate).
    TokenFile(PathBuf),
    /// A kubeconfig exec credential plugin, run when its token is due.
    Exec(std::sync::Arc<ExecPlugin>),
}

impl PartialEq for ExecPlugin {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for ExecPlugin {}

// Tokens never reach logs.
impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::None => f.write_str("None"),
            Credential::Token(_) => f.write_str("Token(<redacted>)"),
            Credential::TokenFile(p) => f.debug_tuple("TokenFile").field(p).finish(),
            Credential::Exec(_) => f.write_str("Exec(<plugin>)"),
        }
    }
}

/// A fully resolved upstream: everything the client needs, files read.
#[derive(Debug, Clone)]
pub struct ResolvedUpstream {
    /// The server URL (scheme, authority, optional path prefix).
    pub server: Uri,
    /// CAs that verify the server (empty for `http://`).
    pub roots: Vec<CertificateDer<'static>>,
    /// Accept any server certificate (kubeconfig `insecure-skip-tls-verify`).
    pub insecure_skip_tls_verify: bool,
    /// The proxy's client certificate, if any.
    pub client_identity: Option<ClientIdentity>,
    /// The proxy's bearer token, if any.
    pub credential: Credential,
}

/// Where in-cluster configuration comes from; injectable for tests.
#[derive(Debug, Clone)]
pub struct InClusterEnv {
    /// `KUBERNETES_SERVICE_HOST`.
    pub host: Option<String>,
    /// `KUBERNETES_SERVICE_PORT`.
    pub port: Option<String>,
    /// The service account directory.
    pub service_account_dir: PathBuf,
}

impl InClusterEnv {
    /// The process environment and the standard service account directory.
    pub fn from_process() -> Self {
        InClusterEnv {
            host: std::env::var("KUBERNETES_SERVICE_HOST").ok(),
            port: std::env::var("KUBERNETES_SERVICE_PORT").ok(),
            service_account_dir: PathBuf::from(IN_CLUSTER_SERVICE_ACCOUNT_DIR),
        }
    }
}

// === impl UpstreamConfig ===

impl UpstreamConfig {
    /// Resolves against the process environment (see the module docs for the order).
    pub fn resolve(&self) -> Result<ResolvedUpstream, UpstreamConfigError> {
        self.resolve_with(&InClusterEnv::from_process())
    }

    /// Resolves with an explicit in-cluster environment.
    pub fn resolve_with(
        &self,
        env: &InClusterEnv,
    ) -> Result<ResolvedUpstream, UpstreamConfigError> {
        self.check_flag_files()?;
        let mut base = match (&self.kubeconfig, &self.upstream) {
            (Some(path), _) => Kubeconfig::load(path)?,
            (None, Some(_)) => KubeconfigContext::default(),
            (None, None) => in_cluster(env)?,
        };
        if let Some(server) = &self.upstream {
            base.server = server.clone();
        }
        if let Some(ca) = &self.ca_file {
            base.certificate_authority = Some(PemSource::File(ca.clone()));
            base.insecure_skip_tls_verify = false;
        }
        if let (Some(cert), Some(key)) = (&self.client_cert_file, &self.client_key_file) {
            base.client_certificate = Some(PemSource::File(cert.clone()));
            base.client_key = Some(PemSource::File(key.clone()));
        } else if self.client_cert_file.is_some() || self.client_key_file.is_some() {
            return Err(UpstreamConfigError::IncompleteClientIdentity);
        }
        if let Some(token_file) = &self.token_file {
            base.token = None;
            base.token_file = Some(token_file.clone());
        }
        resolve_context(base)
    }
}

impl UpstreamConfig {
    /// Reads each file a flag names once, so that one that cannot be read is reported with its
    /// flag (`--upstream-ca-file /nope: cannot read: ...`) rather than as a bare path.
    fn check_flag_files(&self) -> Result<(), UpstreamConfigError> {
        let files = [
            ("--upstream-ca-file", &self.ca_file),
            ("--upstream-client-cert-file", &self.client_cert_file),
            ("--upstream-client-key-file", &self.client_key_file),
            ("--upstream-token-file", &self.token_file),
        ];
        for (flag, path) in files {
            let Some(path) = path else { continue };
            if let Err(UpstreamConfigError::Read { reason, .. }) = read_bounded(path) {
                return Err(UpstreamConfigError::FlagFile {
                    flag,
                    path: path.clone(),
                    reason,
                });
            }
        }
        Ok(())
    }
}

fn in_cluster(env: &InClusterEnv) -> Result<KubeconfigContext, UpstreamConfigError> {
    let (Some(host), Some(port)) = (env.host.as_deref(), env.port.as_deref()) else {
        return Err(UpstreamConfigError::NoUpstream);
    };
    if host.is_empty() || port.is_empty() {
        return Err(UpstreamConfigError::NoUpstream);
    }
    // An IPv6 service address needs brackets, as net.JoinHostPort adds them.
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    Ok(KubeconfigContext {
        server: format!("https://{host}:{port}"),
        certificate_authority: Some(PemSource::File(env.service_account_dir.join("ca.crt"))),
        token_file: Some(env.service_account_dir.join("token")),
        ..KubeconfigContext::default()
    })
}

fn resolve_context(ctx: KubeconfigContext) -> Result<ResolvedUpstream, UpstreamConfigError> {
    let server = parse_server(&ctx.server)?;
    let roots = match &ctx.certificate_authority {
        Some(source) => certificates(source, "certificate authority")?,
        None => Vec::new(),
    };
    let client_identity = match (&ctx.client_certificate, &ctx.client_key) {
        (Some(cert), Some(key)) => Some(ClientIdentity {
            chain: certificates(cert, "client certificate")?,
            key: private_key(key)?,
        }),
        (None, None) => None,
        _ => return Err(UpstreamConfigError::IncompleteClientIdentity),
    };
    let credential = match (ctx.token, ctx.token_file) {
        (Some(token), _) => Credential::Token(token),
        (None, Some(file)) => {
            // Read once now so that a wrong path fails at start, not at the first request.
            read_bounded(&file)?;
            Credential::TokenFile(file)
        }
        (None, None) => match ctx.exec {
            Some((config, cluster)) => {
                Credential::Exec(std::sync::Arc::new(ExecPlugin::new(config, cluster)))
            }
            None => Credential::None,
        },
    };
    Ok(ResolvedUpstream {
        server,
        roots,
        insecure_skip_tls_verify: ctx.insecure_skip_tls_verify,
        client_identity,
        credential,
    })
}

fn parse_server(url: &str) -> Result<Uri, UpstreamConfigError> {
    let invalid = |reason: &str| UpstreamConfigError::InvalidUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
    match uri.scheme_str() {
        Some("https") | Some("http") => {}
        _ => return Err(invalid("the scheme must be https or http")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    if uri.query().is_some() {
        return Err(invalid("a query is not allowed"));
    }
    Ok(uri)
}

/// Reads a file of at most [`MAX_CREDENTIAL_FILE_BYTES`].
pub(crate) fn read_bounded(path: &Path) -> Result<Vec<u8>, UpstreamConfigError> {
    use std::io::Read;
    let read_err = |reason: String| UpstreamConfigError::Read {
        path: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| read_err(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_CREDENTIAL_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| read_err(e.to_string()))?;
    if bytes.len() as u64 > MAX_CREDENTIAL_FILE_BYTES {
        return Err(read_err(format!(
            "larger than {MAX_CREDENTIAL_FILE_BYTES} bytes"
        )));
    }
    Ok(bytes)
}

fn pem_bytes(source: &PemSource) -> Result<(Vec<u8>, String), UpstreamConfigError> {
    match source {
        PemSource::Inline(bytes) => Ok((bytes.clone(), "inline data".to_string())),
        PemSource::File(path) => Ok((read_bounded(path)?, path.display().to_string())),
    }
}

fn certificates(
    source: &PemSource,
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, UpstreamConfigError> {
    let (bytes, origin) = pem_bytes(source)?;
    let pem_err = |reason: String| UpstreamConfigError::Pem {
        what: format!("{what} ({origin})"),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_err("no PEM certificate found".to_string()));
    }
    Ok(certs)
}

fn private_key(source: &PemSource) -> Result<PrivateKeyDer<'static>, UpstreamConfigError> {
    let (bytes, origin) = pem_bytes(source)?;
    // The error never includes key bytes.
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| UpstreamConfigError::Pem {
        what: format!("client key ({origin})"),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests;
