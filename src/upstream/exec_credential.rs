//! kubeconfig exec credential plugins (`users[].user.exec`): `aws eks get-token`,
//! `gke-gcloud-auth-plugin`, `kubelogin` and the like, run as client-go runs them
//! (`plugin/pkg/client/auth/exec/exec.go`):
//!
//! - the command with its `args` and `env` added to the proxy's environment, standard input
//!   closed (the proxy never has a terminal: `interactiveMode: Always` is refused when the
//!   kubeconfig is read, `IfAvailable` and `Never` run without one), standard error passed
//!   through to the proxy's, and `KUBERNETES_EXEC_INFO` holding an `ExecCredential` with
//!   `spec.interactive: false` and, with `provideClusterInfo`, `spec.cluster` (server, CA data,
//!   insecure-skip-tls-verify);
//! - its standard output must be an `ExecCredential` of the configured `apiVersion`
//!   (`client.authentication.k8s.io/v1` or `v1beta1`) whose `status` holds a `token`, a client
//!   certificate and key (`clientCertificateData`, `clientKeyData`, PEM), or both; the
//!   certificate is presented by new upstream connections through [`ExecCertResolver`]
//!   (connections already open keep the one they were made with);
//! - the credential is cached until `status.expirationTimestamp` (for ever without one), run
//!   again [`REFRESH_MARGIN`] before it expires, and after the upstream answered 401 to it;
//!   concurrent requests share one run;
//! - a command that is missing (its `installHint` in the error), exits non-zero, runs longer
//!   than [`PLUGIN_TIMEOUT`] (it is killed), or prints something that is not a credential is an
//!   error that names the command and never what it printed; the last good credential is used
//!   while it has not expired.
//!
//! Where we differ: client-go has no timeout (a hung plugin hangs its client); output beyond
//! [`MAX_OUTPUT_BYTES`] is refused as soon as it is read. Each run is its own process group,
//! killed whole (`SIGKILL`) on timeout, on too much output, when the request waiting for it goes
//! away and at shutdown: a wrapper script's hung child is not left behind. One run at a time.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

/// How long one plugin run may take before it is killed.
pub const PLUGIN_TIMEOUT: Duration = Duration::from_secs(30);
/// A credential is refreshed this long before its `expirationTimestamp`.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(10);
/// The most a plugin may print on standard output.
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;

/// The API versions of `ExecCredential` the proxy speaks.
pub const API_VERSIONS: [&str; 2] = [
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
];

/// The kubeconfig's `exec` stanza.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecConfig {
    /// The program.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables added to the proxy's.
    #[serde(default)]
    pub env: Vec<ExecEnvVar>,
    /// The `ExecCredential` version to exchange.
    #[serde(default)]
    pub api_version: String,
    /// Shown when the command cannot be found.
    #[serde(default)]
    pub install_hint: String,
    /// Pass the cluster in `KUBERNETES_EXEC_INFO`.
    #[serde(default)]
    pub provide_cluster_info: bool,
    /// `Never`, `IfAvailable` or `Always`.
    #[serde(default)]
    pub interactive_mode: String,
}

/// One `env` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct ExecEnvVar {
    /// The variable.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// The cluster a plugin is told about with `provideClusterInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ExecCluster {
    /// The apiserver URL.
    pub server: String,
    /// The CA bundle, base64 (`certificate-authority-data`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub certificate_authority_data: String,
    /// `insecure-skip-tls-verify`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_tls_verify: bool,
}

/// Why the plugin gave no usable credential. Never carries what the plugin printed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// The kubeconfig's `exec` stanza is unusable.
    #[error("exec plugin: {0}")]
    Config(String),
    /// The command is not there.
    #[error("exec plugin: executable {command} not found{hint}")]
    NotFound {
        /// The command.
        command: String,
        /// `\n\n` and the `installHint`, or empty.
        hint: String,
    },
    /// It could not be started, or its output not read.
    #[error("exec plugin {command}: {reason}")]
    Run {
        /// The command.
        command: String,
        /// Why.
        reason: String,
    },
    /// It exited unsuccessfully.
    #[error("exec plugin {command}: exited with {status}")]
    Failed {
        /// The command.
        command: String,
        /// Its exit status.
        status: String,
    },
    /// It ran longer than the timeout and was killed.
    #[error("exec plugin {command}: no credential within {timeout:?}; killed")]
    Timeout {
        /// The command.
        command: String,
        /// The timeout.
        timeout: Duration,
    },
    /// What it printed is not a credential.
    #[error("exec plugin {command}: {reason}")]
    Invalid {
        /// The command.
        command: String,
        /// What is wrong (never the output itself).
        reason: String,
    },
}

/// A credential the plugin printed.
#[derive(Clone)]
pub struct ExecCredential {
    /// The bearer token, if it gave one.
    pub token: Option<String>,
    /// The client certificate chain and key, if it gave them.
    pub client_key: Option<Arc<CertifiedKey>>,
    /// When it expires; `None`: never.
    pub expires: Option<Timestamp>,
}

// Tokens never reach logs.
impl std::fmt::Debug for ExecCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecCredential")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("client_certificate", &self.client_key.is_some())
            .field("expires", &self.expires)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Output {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    status: Option<OutputStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct OutputStatus {
    #[serde(default)]
    token: String,
    expiration_timestamp: Option<String>,
    #[serde(default)]
    client_certificate_data: String,
    #[serde(default)]
    client_key_data: String,
}

/// Checks the `exec` stanza as client-go does when it builds the authenticator.
pub fn validate(config: &ExecConfig) -> Result<(), ExecError> {
    if config.command.is_empty() {
        return Err(ExecError::Config("exec.command is empty".into()));
    }
    if !API_VERSIONS.contains(&config.api_version.as_str()) {
        return Err(ExecError::Config(format!(
            "exec.apiVersion {:?} is not one of {}",
            config.api_version,
            API_VERSIONS.join(", ")
        )));
    }
    match config.interactive_mode.as_str() {
        "" | "Never" | "IfAvailable" => Ok(()),
        "Always" => Err(ExecError::Config(format!(
            "exec plugin {} has interactiveMode Always, but the proxy has no terminal to give it; \
             configure the plugin to get its credential without one (IfAvailable or Never)",
            config.command
        ))),
        other => Err(ExecError::Config(format!(
            "exec.interactiveMode {other:?} is not Never, IfAvailable or Always"
        ))),
    }
}

/// Parses what a plugin printed; `api_version` is the one asked for.
pub fn parse_output(
    command: &str,
    api_version: &str,
    stdout: &[u8],
) -> Result<ExecCredential, ExecError> {
    let invalid = |reason: String| ExecError::Invalid {
        command: command.to_string(),
        reason,
    };
    let output: Output = serde_json::from_slice(stdout).map_err(|e| {
        invalid(format!(
            "its output is not an ExecCredential (JSON error at line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    if output.kind != "ExecCredential" {
        return Err(invalid(format!(
            "its output has kind {:?}, not ExecCredential",
            output.kind
        )));
    }
    if output.api_version != api_version {
        return Err(invalid(format!(
            "its output has apiVersion {:?}, but {api_version} was asked for",
            output.api_version
        )));
    }
    let status = output
        .status
        .ok_or_else(|| invalid("its output has no status".into()))?;
    let client_key = match (
        status.client_certificate_data.is_empty(),
        status.client_key_data.is_empty(),
    ) {
        (true, true) => None,
        (false, false) => Some(
            certified_key(&status.client_certificate_data, &status.client_key_data)
                .map_err(invalid)?,
        ),
        _ => return Err(invalid(
            "its output has a client certificate without its key, or a key without its certificate"
                .into(),
        )),
    };
    let token = Some(status.token).filter(|t| !t.is_empty());
    if token.is_none() && client_key.is_none() {
        return Err(invalid(
            "its output has neither status.token nor a client certificate".into(),
        ));
    }
    let expires = match status.expiration_timestamp.filter(|t| !t.is_empty()) {
        None => None,
        Some(text) => Some(text.parse::<Timestamp>().map_err(|_| {
            invalid("its status.expirationTimestamp is not an RFC 3339 time".into())
        })?),
    };
    Ok(ExecCredential {
        token,
        client_key,
        expires,
    })
}

/// The certificate chain and key a plugin printed, ready for handshakes.
fn certified_key(cert_pem: &str, key_pem: &str) -> Result<Arc<CertifiedKey>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|_| "its status.clientCertificateData is not PEM".to_string())?;
    if chain.is_empty() {
        return Err("its status.clientCertificateData holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|_| "its status.clientKeyData is not a PEM private key".to_string())?;
    let signing_key = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|_| "its status.clientKeyData is a key type TLS cannot use".to_string())?;
    Ok(Arc::new(CertifiedKey::new(chain, signing_key)))
}

/// The wall-clock time now (expiration timestamps are wall-clock times).
pub fn now() -> Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
    let nanos = i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0);
    Timestamp::new(seconds, nanos).unwrap_or(Timestamp::MAX)
}

/// Whether `credential` is still good at `now`, with [`REFRESH_MARGIN`] to spare.
pub fn is_fresh(credential: &ExecCredential, now: Timestamp) -> bool {
    credential.expires.is_none_or(|expires| {
        let margin = k8s_openapi::jiff::SignedDuration::try_from(REFRESH_MARGIN)
            .unwrap_or(k8s_openapi::jiff::SignedDuration::ZERO);
        expires
            .checked_sub(margin)
            .is_ok_and(|refresh_at| now < refresh_at)
    })
}

/// Whether `credential` may still be used at all at `now` (a stale but unexpired one is kept
/// when a refresh fails).
pub fn is_unexpired(credential: &ExecCredential, now: Timestamp) -> bool {
    credential.expires.is_none_or(|expires| now < expires)
}

/// Runs plugins; counts their runs.
#[derive(Debug)]
pub struct ExecPlugin {
    config: ExecConfig,
    cluster: ExecCluster,
    timeout: Duration,
    cached: tokio::sync::Mutex<Option<ExecCredential>>,
    /// The client certificate of the credential in force, read by handshakes (synchronously).
    current_key: parking_lot::Mutex<Option<Arc<CertifiedKey>>>,
    runs: AtomicU64,
    failures: AtomicU64,
}

impl ExecPlugin {
    /// A plugin for `config` (already [`validate`]d), telling it about `cluster` when asked.
    pub fn new(config: ExecConfig, cluster: ExecCluster) -> Self {
        Self::with_timeout(config, cluster, PLUGIN_TIMEOUT)
    }

    /// [`ExecPlugin::new`] with another run timeout.
    pub fn with_timeout(config: ExecConfig, cluster: ExecCluster, timeout: Duration) -> Self {
        ExecPlugin {
            config,
            cluster,
            timeout,
            cached: tokio::sync::Mutex::new(None),
            current_key: parking_lot::Mutex::new(None),
            runs: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    /// `(runs, failed runs)` so far.
    pub fn runs(&self) -> (u64, u64) {
        (
            self.runs.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
        )
    }

    /// Makes sure a fresh credential is in force and returns its token (`None` when the plugin
    /// gives only a client certificate, which [`ExecCertResolver`] then presents): cached while
    /// fresh, else from one run shared by every caller waiting meanwhile. A failed run keeps an
    /// unexpired cached credential.
    pub async fn token(&self) -> Result<Option<String>, ExecError> {
        let mut cached = self.cached.lock().await;
        let now = now();
        if let Some(credential) = cached.as_ref().filter(|c| is_fresh(c, now)) {
            return Ok(credential.token.clone());
        }
        match self.run().await {
            Ok(credential) => {
                let token = credential.token.clone();
                *self.current_key.lock() = credential.client_key.clone();
                *cached = Some(credential);
                Ok(token)
            }
            Err(error) => match cached.as_ref().filter(|c| is_unexpired(c, now)) {
                Some(stale) => {
                    tracing::warn!(%error, "Exec plugin failed; keeping the unexpired credential");
                    Ok(stale.token.clone())
                }
                None => Err(error),
            },
        }
    }

    /// The client certificate of the credential in force, if any.
    pub fn client_key(&self) -> Option<Arc<CertifiedKey>> {
        self.current_key.lock().clone()
    }

    /// The upstream refused `token` (401): the next request runs the plugin again, unless a
    /// newer credential is already cached.
    pub async fn invalidate(&self, token: &str) {
        let mut cached = self.cached.lock().await;
        if cached
            .as_ref()
            .is_some_and(|c| c.token.as_deref() == Some(token))
        {
            *cached = None;
        }
    }

    async fn run(&self) -> Result<ExecCredential, ExecError> {
        self.runs.fetch_add(1, Ordering::Relaxed);
        let result = self.run_once().await;
        if let Err(error) = &result {
            self.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, "Exec credential plugin failed");
        }
        result
    }

    async fn run_once(&self) -> Result<ExecCredential, ExecError> {
        let command = &self.config.command;
        let run_error = |reason: String| ExecError::Run {
            command: command.clone(),
            reason,
        };
        let mut child = tokio::process::Command::new(command)
            .args(&self.config.args)
            .envs(self.config.env.iter().map(|e| (&e.name, &e.value)))
            .env("KUBERNETES_EXEC_INFO", self.exec_info())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own process group, so that what it starts is killed with it.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => ExecError::NotFound {
                    command: command.clone(),
                    hint: if self.config.install_hint.is_empty() {
                        String::new()
                    } else {
                        format!("\n\n{}", self.config.install_hint)
                    },
                },
                _ => run_error(error.to_string()),
            })?;
        // Killed, the plugin and everything it started, unless the run ends normally: on
        // timeout, on an error, when the caller goes away and at shutdown (the future dropped).
        let mut group = ProcessGroup::of(&child);
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| run_error("no standard output".into()))?;
        let run = async {
            let mut out = Vec::new();
            (&mut stdout)
                .take(MAX_OUTPUT_BYTES as u64 + 1)
                .read_to_end(&mut out)
                .await
                .map_err(|e| run_error(format!("reading its output: {e}")))?;
            if out.len() > MAX_OUTPUT_BYTES {
                // At once: a plugin still writing would block on the pipe until the timeout.
                return Err(ExecError::Invalid {
                    command: command.clone(),
                    reason: format!("it printed more than {MAX_OUTPUT_BYTES} bytes"),
                });
            }
            let status = child.wait().await.map_err(|e| run_error(e.to_string()))?;
            Ok::<_, ExecError>((out, status))
        };
        let (out, status) = tokio::time::timeout(self.timeout, run)
            .await
            .map_err(|_| ExecError::Timeout {
                command: command.clone(),
                timeout: self.timeout,
            })??;
        // It exited by itself: what it left running is its own business, as with client-go.
        group.disarm();
        if !status.success() {
            return Err(ExecError::Failed {
                command: command.clone(),
                status: status.to_string(),
            });
        }
        parse_output(command, &self.config.api_version, &out)
    }

    /// `KUBERNETES_EXEC_INFO`: an `ExecCredential` with the spec client-go sends.
    fn exec_info(&self) -> String {
        let mut spec = serde_json::json!({"interactive": false});
        if self.config.provide_cluster_info {
            spec["cluster"] = serde_json::to_value(&self.cluster).unwrap_or_default();
        }
        serde_json::json!({"kind": "ExecCredential", "apiVersion": self.config.api_version,
            "spec": spec})
        .to_string()
    }
}

/// The process group of one plugin run (the plugin is its leader, `process_group(0)`): killed
/// with `SIGKILL` when dropped while armed, so that a plugin's children (a wrapper script's
/// cloud CLI stuck on the network) die with it instead of outliving the run.
struct ProcessGroup(Option<nix::unistd::Pid>);

impl ProcessGroup {
    fn of(child: &tokio::process::Child) -> Self {
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(nix::unistd::Pid::from_raw);
        ProcessGroup(pgid)
    }

    /// The run ended normally: nothing is killed.
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            // The leader is not reaped yet (the `Child` is dropped after this), so the group id
            // is still its own; the group may be gone already (ESRCH).
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Presents the exec plugin's current client certificate in upstream TLS handshakes.
#[derive(Debug)]
pub struct ExecCertResolver(pub Arc<ExecPlugin>);

impl ResolvesClientCert for ExecCertResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.0.client_key()
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
