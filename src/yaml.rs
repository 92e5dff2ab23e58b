//! The one YAML parser and printer every room reads and writes YAML through.
//!
//! `serde_yaml` is deprecated upstream; its API-compatible successors (and any other parser) are
//! swapped in here, in one place: no other file names the crate. The value tree ([`Value`],
//! [`Mapping`]) that the configuration decoder walks is re-exported from here for the same reason.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use serde_yaml::{Error, Mapping, Value};

/// Parses one YAML document (JSON is YAML too) into `T`; more than one document is an error.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_yaml::from_str(text)
}

/// Parses every document of a `---`-separated stream, in order, each as a [`Value`]. After an
/// error the rest of the stream cannot be trusted: callers stop at the first one.
pub fn documents(text: &str) -> impl Iterator<Item = Result<Value, Error>> + '_ {
    serde_yaml::Deserializer::from_str(text).map(Value::deserialize)
}

/// Any serializable value as a YAML [`Value`] tree.
pub fn to_value<T: Serialize>(value: T) -> Result<Value, Error> {
    serde_yaml::to_value(value)
}

/// `value` written as one YAML document (without a leading `---`).
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    serde_yaml::to_string(value)
}
