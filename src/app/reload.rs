//! Hot reload: the flow-control configuration directory, the serving certificate and the client
//! CAs, polled for changes ([`crate::file_watch`]) and re-read on SIGHUP.
//!
//! Polling content digests instead of using inotify (the `notify` crate) because the files are
//! few and small, it works the same on every file system (Kubernetes ConfigMap and Secret volumes
//! swap a `..data` symlink, which inotify watchers often miss), and it needs no new dependency.
//! A valid configuration is applied with [`FlowControl::apply_config`] (queued and executing
//! requests stay); an invalid one is rejected whole, each problem logged, and the last good one
//! stays. Changed client CA files (`--client-ca-file`, `--requestheader-client-ca-file`) are
//! read again as the apiserver's `DynamicFileCAContent` does: the authenticators and the
//! handshake's verifier take the new bundle together; an unusable file is refused, logged and
//! counted, and its last good bundle stays.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use crate::auth::Authenticator;
use crate::config::{self, ConfigError};
use crate::fairqueue::controller::FlowControl;
use crate::fairqueue::shadow::Shadow;
use crate::file_watch::{dir_digest, files_digest, poll_ticks};
use crate::metrics::{CertificateKind, Metrics};
use crate::server::ServerTls;

/// Why a configuration reload was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new configuration is invalid (each problem has been logged).
    #[error("the configuration in {source_name} is invalid ({problems} problems); the last good one stays")]
    Invalid {
        /// The directory, or `<cluster>`.
        source_name: String,
        /// How many problems were found.
        problems: usize,
    },
    /// The directory or a file could not be read.
    #[error(transparent)]
    Read(#[from] ConfigError),
}

/// What is reloaded and where the results go.
#[derive(Debug, Clone)]
pub struct Reloader {
    /// The flow controller to apply configurations to.
    pub flow_control: Arc<FlowControl>,
    /// Counts reloads (`apf_proxy_config_reloads_total`) and publishes the new limits.
    pub metrics: Arc<Metrics>,
    /// `--config-dir`; `None`: the embedded default, never reloaded.
    pub config_dir: Option<PathBuf>,
    /// The serving certificate.
    pub tls: ServerTls,
    /// The secure admin listener's own certificate (`--admin-tls-cert-file`), when given.
    pub admin_tls: Option<ServerTls>,
    /// `--tls-cert-file`, `--tls-private-key-file` and the `--admin-tls-*` files, when given.
    pub cert_files: Vec<PathBuf>,
    /// The authenticators holding the client CA bundles.
    pub authenticator: Arc<Authenticator>,
    /// `--client-ca-file` and `--requestheader-client-ca-file`, when given.
    pub ca_files: Vec<PathBuf>,
    /// The shadows: a dry-run one follows every configuration applied; a candidate one reloads
    /// its own directory on the same triggers.
    pub shadows: Vec<Arc<Shadow>>,
}

impl Reloader {
    /// Loads `--config-dir` and applies it. A no-op without a directory.
    pub fn reload_config(&self, now: Instant) -> Result<(), ReloadError> {
        let Some(dir) = &self.config_dir else {
            return Ok(());
        };
        let applied = self.apply_loaded(&dir.display().to_string(), config::load_dir(dir), now);
        if applied.is_ok() {
            tracing::info!(dir = %dir.display(), "Configuration reloaded");
        }
        applied
    }

    /// Applies a loaded configuration from `source_name` (a directory, or the cluster) in place,
    /// or refuses it whole, logging each problem and counting the reload either way. Queued and
    /// executing requests survive a change; the last good configuration stays on refusal.
    pub fn apply_loaded(
        &self,
        source_name: &str,
        loaded: Result<config::Loaded, ConfigError>,
        now: Instant,
    ) -> Result<(), ReloadError> {
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(ConfigError::Invalid { problems, warnings }) => {
                warnings
                    .iter()
                    .for_each(|w| tracing::warn!(%w, "Configuration warning"));
                for problem in &problems {
                    tracing::error!(%problem, "Configuration rejected");
                }
                self.metrics.record_config_reload(false, SystemTime::now());
                return Err(ReloadError::Invalid {
                    source_name: source_name.to_string(),
                    problems: problems.len(),
                });
            }
            Err(error) => {
                self.metrics.record_config_reload(false, SystemTime::now());
                return Err(error.into());
            }
        };
        for warning in &loaded.warnings {
            tracing::warn!(%warning, "Configuration warning");
        }
        for problem in self.flow_control.apply_config(&loaded.config, now) {
            tracing::warn!(%problem, "Priority level not (re)configured");
        }
        super::publish_limits(&self.metrics, &self.flow_control, None);
        for shadow in self.shadows.iter().filter(|s| s.dir().is_none()) {
            shadow.apply_config(&loaded.config);
        }
        self.metrics.record_config_reload(true, SystemTime::now());
        Ok(())
    }

    /// Reads the serving (and admin) certificate files again; the current certificate stays on
    /// error.
    pub fn reload_tls(&self) {
        for tls in std::iter::once(&self.tls).chain(&self.admin_tls) {
            match tls.reload() {
                Ok(false) => {}
                Ok(true) => self
                    .metrics
                    .record_certificate_reload(CertificateKind::Serving, true),
                Err(error) => {
                    self.metrics
                        .record_certificate_reload(CertificateKind::Serving, false);
                    tracing::error!(%error, "Serving certificate not reloaded; the current one stays")
                }
            }
        }
        self.publish_certificate_expiry();
    }

    /// Publishes when the certificates in force expire first
    /// (`apf_proxy_certificate_expiration_timestamp_seconds`): the served chains of both
    /// listeners, and the client CA bundles. At start and after every reload.
    pub fn publish_certificate_expiry(&self) {
        let serving = std::iter::once(&self.tls)
            .chain(&self.admin_tls)
            .map(|tls| crate::auth::earliest_not_after(&tls.cert.current().cert))
            .try_fold(u64::MAX, |min, at| at.map(|at| min.min(at)));
        self.metrics
            .set_certificate_expiry(CertificateKind::Serving, serving);
        let client_cas = crate::auth::earliest_not_after(&self.authenticator.client_ca_roots());
        self.metrics
            .set_certificate_expiry(CertificateKind::ClientCa, client_cas);
    }

    /// Reads the client CA bundles again; each unusable one keeps its last good bundle. The
    /// handshake's certificate request names whatever the authenticators then hold.
    pub fn reload_client_cas(&self) {
        if self.ca_files.is_empty() {
            return;
        }
        let bundles = self.authenticator.reload_client_cas();
        if let Err(error) = &bundles {
            tracing::error!(%error, "Client CA bundle not reloaded; the last good one stays");
        }
        if matches!(bundles, Ok(false)) {
            return;
        }
        let roots = self.authenticator.client_ca_roots();
        let handshake = std::iter::once(&self.tls)
            .chain(&self.admin_tls)
            .try_for_each(|tls| tls.set_client_ca_roots(&roots));
        if let Err(error) = &handshake {
            tracing::error!(%error, "Client CAs of the TLS handshake not replaced");
        }
        let success = bundles.is_ok() && handshake.is_ok();
        self.metrics
            .record_certificate_reload(CertificateKind::ClientCa, success);
        self.publish_certificate_expiry();
    }

    /// Watches until aborted: polls the files and reloads what changed; on SIGHUP reloads both.
    /// The files' state is taken now (not when the future first runs), so a change made after
    /// this call is never mistaken for the starting point.
    pub fn run(self) -> impl std::future::Future<Output = ()> + Send {
        let config_stamp = self.config_dir.as_deref().map(dir_digest);
        let shadow_stamps = self.shadow_stamps();
        let cert_stamp = files_digest(&self.cert_files);
        let ca_stamp = files_digest(&self.ca_files);
        let hangups = hangups();
        self.watch(config_stamp, shadow_stamps, [cert_stamp, ca_stamp], hangups)
    }

    /// Loads every candidate shadow's directory again (`--shadow-config-dir`); a failure keeps
    /// the shadow's last good configuration and never touches the one in force.
    pub fn reload_shadows(&self) {
        for shadow in &self.shadows {
            shadow.reload();
        }
    }

    /// The digest of each candidate shadow's directory (`None` for a dry-run shadow).
    fn shadow_stamps(&self) -> Vec<Option<[u8; 32]>> {
        self.shadows
            .iter()
            .map(|s| s.dir().map(dir_digest))
            .collect()
    }

    async fn watch(
        self,
        mut config_stamp: Option<[u8; 32]>,
        mut shadow_stamps: Vec<Option<[u8; 32]>>,
        [mut cert_stamp, mut ca_stamp]: [[u8; 32]; 2],
        mut hangups: Hangups,
    ) {
        let mut ticks = poll_ticks();
        loop {
            let forced = tokio::select! {
                _ = ticks.tick() => false,
                () = next_hangup(&mut hangups) => true,
            };
            if forced {
                tracing::info!("SIGHUP: reloading the configuration and certificates");
            }
            let stamp = self.config_dir.as_deref().map(dir_digest);
            if forced || stamp != config_stamp {
                config_stamp = stamp;
                if let Err(error) = self.reload_config(Instant::now()) {
                    tracing::error!(%error, "Configuration reload failed");
                }
            }
            let stamps = self.shadow_stamps();
            if forced || stamps != shadow_stamps {
                self.reload_shadows();
            }
            shadow_stamps = stamps;
            let stamp = files_digest(&self.cert_files);
            if forced || stamp != cert_stamp {
                cert_stamp = stamp;
                self.reload_tls();
            }
            let stamp = files_digest(&self.ca_files);
            if forced || stamp != ca_stamp {
                ca_stamp = stamp;
                self.reload_client_cas();
            }
        }
    }
}

#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = ();

#[cfg(unix)]
fn hangups() -> Hangups {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(stream) => Some(stream),
        Err(error) => {
            tracing::warn!(%error, "Cannot listen for SIGHUP; reloads only on file changes");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangups() -> Hangups {}

#[cfg(unix)]
async fn next_hangup(hangups: &mut Hangups) {
    let received = match hangups {
        Some(stream) => stream.recv().await.is_some(),
        None => false,
    };
    if !received {
        // No SIGHUP stream (or it ended): only file changes trigger reloads.
        *hangups = None;
        std::future::pending::<()>().await;
    }
}

#[cfg(not(unix))]
async fn next_hangup(_: &mut Hangups) {
    std::future::pending().await
}

impl crate::config_source::ApplyConfig for Reloader {
    fn apply_loaded(
        &self,
        source_name: &str,
        loaded: Result<config::Loaded, ConfigError>,
        now: Instant,
    ) -> Result<(), crate::body::BoxError> {
        Reloader::apply_loaded(self, source_name, loaded, now).map_err(Into::into)
    }
}
