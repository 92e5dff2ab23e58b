//! The secure listener end to end over loopback: TLS, ALPN, client certificates, limits,
//! shutdown; and the admin listener.

mod admin;
mod lifecycle;
mod limits;
mod shutdown;
mod support;
mod tls;

// Imports shared by the test modules, which `use super::*`.
use std::sync::Arc;
use std::time::Duration;

use http::{Request, StatusCode, Version};
use hyper::body::Incoming;
use kube_apf_proxy::server::tls::{TlsCipherSuite, TlsMinVersion};
use kube_apf_proxy::server::{ConnectionInfo, ConnectionLimits, TlsSettings};
use support::{connect, echo_handler, get, settings, start, Ca, ClientOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

static TLS12_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];

/// Upper bound for anything that should happen promptly; never reached when the code is right.
const PROMPTLY: Duration = Duration::from_secs(10);
