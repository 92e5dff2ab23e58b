//! The body type every room shares: what the server answers with, the pipeline forwards, the
//! upstream client sends and the webhook writes. A leaf: it imports nothing of the crate.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};

/// A boxed error, as bodies and services carry them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response the proxy writes or forwards, and of every request it sends.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// A body of one in-memory chunk.
pub fn full_body(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body.
pub fn empty_body() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}
