//! A kubeconfig file, reduced to what reaching one apiserver needs.
//!
//! Mirrors client-go's `tools/clientcmd` loading of a single file: the current context's cluster
//! (`server`, `certificate-authority(-data)`, `insecure-skip-tls-verify`) and user
//! (`client-certificate(-data)`, `client-key(-data)`, `token`, `tokenFile`). Relative paths are
//! resolved against the kubeconfig's directory, as client-go does. Exec credential plugins are
//! run as client-go runs them ([`super::exec_credential`]). Differences: no merging of several
//! files (`KUBECONFIG=a:b`), and auth-provider plugins, basic auth and `tls-server-name` /
//! `proxy-url` are refused with a clear error rather than half supported.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

use super::exec_credential::{validate, ExecCluster, ExecConfig};

/// Why a kubeconfig cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The file cannot be read.
    #[error("--kubeconfig {}: cannot read: {source}", path.display())]
    Read {
        /// The kubeconfig path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a kubeconfig.
    #[error("--kubeconfig {}: not a kubeconfig: {source}", path.display())]
    Parse {
        /// The kubeconfig path.
        path: PathBuf,
        /// The YAML error.
        #[source]
        source: crate::yaml::Error,
    },
    /// A context, cluster or user is missing or named nowhere.
    #[error("kubeconfig: {0}")]
    Missing(String),
    /// A `*-data` field is not valid base64.
    #[error("kubeconfig: {field} is not valid base64")]
    Base64 {
        /// The field path.
        field: String,
    },
    /// The exec credential plugin stanza is unusable.
    #[error("kubeconfig: {0}")]
    Exec(String),
    /// A feature the proxy does not implement.
    #[error("kubeconfig: {0} is not supported by kube-apf-proxy; use a token, tokenFile or client certificate")]
    Unsupported(String),
}

/// The raw kubeconfig document (`kind: Config`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(default, rename = "current-context")]
    current_context: String,
}

#[derive(Debug, Clone, Deserialize)]
struct NamedCluster {
    name: String,
    cluster: Cluster,
}

#[derive(Debug, Clone, Deserialize)]
struct NamedUser {
    name: String,
    user: User,
}

#[derive(Debug, Clone, Deserialize)]
struct NamedContext {
    name: String,
    context: Context,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    #[serde(default)]
    server: String,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    username: Option<String>,
    exec: Option<ExecConfig>,
    auth_provider: Option<crate::yaml::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Context {
    cluster: String,
    #[serde(default)]
    user: String,
}

/// PEM material given inline (`*-data`, decoded) or as a file path (resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemSource {
    /// Decoded inline bytes.
    Inline(Vec<u8>),
    /// A file to read.
    File(PathBuf),
}

/// The current context of a kubeconfig, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KubeconfigContext {
    /// The apiserver URL.
    pub server: String,
    /// CAs that verify the server.
    pub certificate_authority: Option<PemSource>,
    /// Skip server certificate verification.
    pub insecure_skip_tls_verify: bool,
    /// Client certificate chain.
    pub client_certificate: Option<PemSource>,
    /// Client private key.
    pub client_key: Option<PemSource>,
    /// A static bearer token.
    pub token: Option<String>,
    /// A bearer token file, re-read as it rotates.
    pub token_file: Option<PathBuf>,
    /// An exec credential plugin (used when neither token nor token file is set, as client-go
    /// lets an explicit bearer token win), and the cluster it may be told about.
    pub exec: Option<(ExecConfig, ExecCluster)>,
}

impl Kubeconfig {
    /// Reads and parses a kubeconfig file, then resolves its current context.
    pub fn load(path: &Path) -> Result<KubeconfigContext, KubeconfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| KubeconfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let parsed = Self::parse(&text).map_err(|source| KubeconfigError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        parsed.current(path.parent().unwrap_or(Path::new(".")))
    }

    /// Parses a kubeconfig document.
    pub fn parse(text: &str) -> Result<Self, crate::yaml::Error> {
        crate::yaml::from_str(text)
    }

    /// Resolves the current context; relative paths are taken from `base_dir`.
    pub fn current(&self, base_dir: &Path) -> Result<KubeconfigContext, KubeconfigError> {
        if self.current_context.is_empty() {
            return Err(KubeconfigError::Missing(
                "current-context is not set".into(),
            ));
        }
        let context = find(&self.contexts, &self.current_context, "context", |c| {
            (&c.name, &c.context)
        })?;
        let cluster = find(&self.clusters, &context.cluster, "cluster", |c| {
            (&c.name, &c.cluster)
        })?;
        let user = if context.user.is_empty() {
            User::default()
        } else {
            find(&self.users, &context.user, "user", |u| (&u.name, &u.user))?.clone()
        };
        check_supported(cluster, &user, &context.user)?;
        if cluster.server.is_empty() {
            return Err(KubeconfigError::Missing(format!(
                "cluster {:?} has no server",
                context.cluster
            )));
        }
        let path = |p: &String| base_dir.join(p);
        Ok(KubeconfigContext {
            server: cluster.server.clone(),
            certificate_authority: pem_source(
                &cluster.certificate_authority_data,
                &cluster.certificate_authority,
                base_dir,
                "cluster.certificate-authority-data",
            )?,
            insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
            client_certificate: pem_source(
                &user.client_certificate_data,
                &user.client_certificate,
                base_dir,
                "user.client-certificate-data",
            )?,
            client_key: pem_source(
                &user.client_key_data,
                &user.client_key,
                base_dir,
                "user.client-key-data",
            )?,
            token: user.token.clone().filter(|t| !t.is_empty()),
            token_file: user.token_file.as_ref().filter(|p| !p.is_empty()).map(path),
            exec: match &user.exec {
                None => None,
                Some(exec) => Some((
                    exec_config(exec, base_dir)?,
                    exec_cluster(cluster, base_dir),
                )),
            },
        })
    }
}

fn find<'a, N, T>(
    items: &'a [N],
    name: &str,
    what: &str,
    split: impl Fn(&'a N) -> (&'a String, &'a T),
) -> Result<&'a T, KubeconfigError> {
    items
        .iter()
        .map(split)
        .find(|(n, _)| *n == name)
        .map(|(_, item)| item)
        .ok_or_else(|| KubeconfigError::Missing(format!("{what} {name:?} not found")))
}

fn check_supported(cluster: &Cluster, user: &User, user_name: &str) -> Result<(), KubeconfigError> {
    let unsupported = |what: &str| Err(KubeconfigError::Unsupported(what.to_string()));
    if user.auth_provider.is_some() {
        return unsupported(&format!("the auth-provider of user {user_name:?}"));
    }
    if user.username.is_some() {
        return unsupported(&format!("basic authentication of user {user_name:?}"));
    }
    if cluster.tls_server_name.is_some() {
        return unsupported("cluster.tls-server-name");
    }
    if cluster.proxy_url.is_some() {
        return unsupported("cluster.proxy-url");
    }
    Ok(())
}

/// The `exec` stanza, checked; a relative command path (with a slash) is taken from the
/// kubeconfig's directory, as client-go resolves it.
fn exec_config(exec: &ExecConfig, base_dir: &Path) -> Result<ExecConfig, KubeconfigError> {
    validate(exec).map_err(|e| KubeconfigError::Exec(e.to_string()))?;
    let mut exec = exec.clone();
    if exec.command.contains('/') && Path::new(&exec.command).is_relative() {
        exec.command = base_dir.join(&exec.command).display().to_string();
    }
    Ok(exec)
}

/// What `provideClusterInfo` tells the plugin: the server, the CA (inline, or the file's
/// content when it can be read) and `insecure-skip-tls-verify`.
fn exec_cluster(cluster: &Cluster, base_dir: &Path) -> ExecCluster {
    let certificate_authority_data = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) if !data.is_empty() => data.split_whitespace().collect(),
        (_, Some(file)) if !file.is_empty() => std::fs::read(base_dir.join(file))
            .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes))
            .unwrap_or_default(),
        _ => String::new(),
    };
    ExecCluster {
        server: cluster.server.clone(),
        certificate_authority_data,
        insecure_skip_tls_verify: cluster.insecure_skip_tls_verify,
    }
}

/// client-go prefers `*-data` over the file when both are set.
fn pem_source(
    data: &Option<String>,
    file: &Option<String>,
    base_dir: &Path,
    field: &str,
) -> Result<Option<PemSource>, KubeconfigError> {
    if let Some(data) = data.as_ref().filter(|d| !d.is_empty()) {
        let compact: String = data.split_whitespace().collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map_err(|_| KubeconfigError::Base64 {
                field: field.to_string(),
            })?;
        return Ok(Some(PemSource::Inline(bytes)));
    }
    Ok(file
        .as_ref()
        .filter(|f| !f.is_empty())
        .map(|f| PemSource::File(base_dir.join(f))))
}

#[cfg(test)]
mod tests;
