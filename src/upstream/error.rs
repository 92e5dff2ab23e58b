//! [`UpstreamError`]: why an exchange with the upstream failed, in the terms the proxy answers
//! with (`proxy::error_response` maps each variant to 502, 503 or 504).

use std::time::Duration;

use crate::body::BoxError;

/// Why forwarding to the upstream failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection to the upstream could be made (refused, unreachable, DNS, TLS handshake):
    /// nothing was sent, so a retry is safe. 503, as the aggregator's and peer proxy's responders
    /// answer when their backend cannot be reached.
    #[error("the upstream apiserver is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The request was sent (at least in part) but no valid response came back: the connection
    /// was closed or reset, or the upstream spoke garbage. 502, as a reverse proxy answers.
    #[error("bad response from the upstream apiserver: {0}")]
    BadGateway(#[source] BoxError),
    /// A new upstream connection was needed and `--upstream-max-connections` are open (for a
    /// long-running request: all but the `reserved` ones kept for ordinary requests). Nothing was
    /// sent. 503 with `Retry-After: 1`, which client-go honours by retrying.
    #[error("the proxy's upstream connection limit is reached ({max} connections{}); retry later", reserved_note(*.reserved))]
    ConnectionLimit {
        /// `--upstream-max-connections`.
        max: usize,
        /// Connections kept for ordinary requests that this (long-running) request could not take.
        reserved: usize,
    },
    /// The upstream did not answer within the request's timeout. 504, as the apiserver's own
    /// timeout filter answers.
    #[error("request did not complete within the allotted timeout ({after:?})")]
    Timeout {
        /// The timeout that elapsed.
        after: Duration,
    },
}

fn reserved_note(reserved: usize) -> String {
    match reserved {
        0 => String::new(),
        n => format!(", of which {n} are kept for requests that are not long-running"),
    }
}

/// Why a connection to the upstream at `scheme://authority` could not be made, each cause once
/// ([`crate::causes::render`]), with a hint where the cause is a common mistake: nothing listens
/// there, or an `https://` upstream answers in plain HTTP.
pub(crate) fn connect_failure(
    error: &(dyn std::error::Error + 'static),
    scheme: &http::uri::Scheme,
    authority: &http::uri::Authority,
) -> String {
    let mut line = format!(
        "connecting to {scheme}://{authority}: {}",
        crate::causes::render(error)
    );
    if let Some(hint) = connect_hint(error, scheme, authority) {
        line.push_str(" (");
        line.push_str(&hint);
        line.push(')');
    }
    line
}

fn connect_hint(
    error: &(dyn std::error::Error + 'static),
    scheme: &http::uri::Scheme,
    authority: &http::uri::Authority,
) -> Option<String> {
    let mut source = Some(error);
    while let Some(cause) = source {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return tls_hint(tls, scheme, authority);
        }
        let io = cause.downcast_ref::<std::io::Error>();
        if io.is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return Some(format!(
                "is the upstream apiserver running and listening on {authority}?"
            ));
        }
        // An I/O error made from another error (tokio-rustls wraps the TLS error so, and
        // hyper-rustls wraps that again) does not return it from `source()`.
        source = match io.and_then(std::io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => cause.source(),
        };
    }
    None
}

fn tls_hint(
    error: &rustls::Error,
    scheme: &http::uri::Scheme,
    authority: &http::uri::Authority,
) -> Option<String> {
    match error {
        rustls::Error::InvalidMessage(_) if *scheme == http::uri::Scheme::HTTPS => Some(format!(
            "{authority} does not answer in TLS; if it serves plain HTTP, use --upstream http://{authority}"
        )),
        rustls::Error::InvalidCertificate(_) => Some(
            "the upstream's certificate is not trusted by --upstream-ca-file (or the kubeconfig's certificate-authority)".to_owned(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use http::uri::{Authority, Scheme};

    use super::connect_failure;

    fn at() -> Authority {
        Authority::from_static("127.0.0.1:6443")
    }

    #[test]
    fn refused_connections_ask_whether_the_upstream_runs() {
        #[derive(Debug, thiserror::Error)]
        #[error("tcp connect error")]
        struct Connect(#[source] io::Error);
        let error = Connect(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(
            connect_failure(&error, &Scheme::HTTP, &at()),
            "connecting to http://127.0.0.1:6443: tcp connect error: connection refused \
             (is the upstream apiserver running and listening on 127.0.0.1:6443?)"
        );
    }

    #[test]
    fn an_https_upstream_answering_plain_http_gets_the_http_url_suggested() {
        // As hyper-rustls hands it over: an I/O error made from tokio-rustls's I/O error made
        // from the rustls error.
        let tls = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
        let error = io::Error::other(io::Error::new(io::ErrorKind::InvalidData, tls));
        assert_eq!(
            connect_failure(&error, &Scheme::HTTPS, &at()),
            "connecting to https://127.0.0.1:6443: received corrupt message of type \
             InvalidContentType (127.0.0.1:6443 does not answer in TLS; if it serves plain \
             HTTP, use --upstream http://127.0.0.1:6443)"
        );
    }

    #[test]
    fn other_failures_get_no_hint() {
        let error = io::Error::from(io::ErrorKind::TimedOut);
        assert_eq!(
            connect_failure(&error, &Scheme::HTTPS, &at()),
            "connecting to https://127.0.0.1:6443: timed out"
        );
    }
}
