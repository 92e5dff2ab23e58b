//! A watch response body, decoded: one JSON `WatchEvent` per line (the apiserver's
//! `application/json` watch framing writes one object after another, each followed by a
//! newline). Sans-I/O: bytes in, events out; every line is bounded.

use bytes::{Buf, BytesMut};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::WatchEvent;
use serde::de::DeserializeOwned;

/// The largest event line accepted: an object is at most the configuration file bound.
pub const MAX_EVENT_BYTES: usize = crate::config::load::MAX_FILE_BYTES as usize;

/// Why a watch stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchStreamError {
    /// A line longer than [`MAX_EVENT_BYTES`] without its newline.
    #[error("a watch event is larger than {MAX_EVENT_BYTES} bytes")]
    TooLarge,
    /// A line that is not a watch event of the expected kind.
    #[error("a watch event does not decode: {0}")]
    Decode(String),
}

/// Splits a watch body into events; keeps at most one partial line.
#[derive(Debug, Default)]
pub struct WatchDecoder {
    pending: BytesMut,
}

impl WatchDecoder {
    /// A decoder with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `bytes` and returns every event completed by them, in order. After an error the
    /// stream must be abandoned (the caller watches again).
    pub fn push<T: DeserializeOwned>(
        &mut self,
        bytes: &[u8],
    ) -> Result<Vec<WatchEvent<T>>, WatchStreamError> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line = self.pending.split_to(end);
            self.pending.advance(1);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event = serde_json::from_slice(&line)
                .map_err(|e| WatchStreamError::Decode(e.to_string()))?;
            events.push(event);
        }
        if self.pending.len() > MAX_EVENT_BYTES {
            return Err(WatchStreamError::TooLarge);
        }
        Ok(events)
    }

    /// The last event of a body that ended without a newline, if any.
    pub fn finish<T: DeserializeOwned>(
        &mut self,
    ) -> Result<Option<WatchEvent<T>>, WatchStreamError> {
        let rest = std::mem::take(&mut self.pending);
        if rest.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        serde_json::from_slice(&rest)
            .map(Some)
            .map_err(|e| WatchStreamError::Decode(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::flowcontrol::v1::FlowSchema;

    use super::*;

    const ADDED: &str = r#"{"type":"ADDED","object":{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema","metadata":{"name":"a","resourceVersion":"7"},"spec":{"priorityLevelConfiguration":{"name":"global-default"}}}}"#;

    fn names(events: &[WatchEvent<FlowSchema>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                    o.metadata.name.clone().unwrap_or_default()
                }
                WatchEvent::Bookmark {
                    resource_version, ..
                } => format!("bookmark {resource_version}"),
                WatchEvent::ErrorStatus(s) => format!("error {:?}", s.code),
                WatchEvent::ErrorOther(_) => "error".into(),
            })
            .collect()
    }

    #[test]
    fn events_split_anywhere_are_put_back_together() {
        let body = format!(
            "{ADDED}\n{}\n{}\n",
            r#"{"type":"BOOKMARK","object":{"kind":"FlowSchema","apiVersion":"flowcontrol.apiserver.k8s.io/v1","metadata":{"resourceVersion":"9"}}}"#,
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"Expired","code":410}}"#
        );
        for split in 0..body.len() {
            let mut decoder = WatchDecoder::new();
            let mut events: Vec<WatchEvent<FlowSchema>> =
                decoder.push(&body.as_bytes()[..split]).expect("first part");
            events.extend(
                decoder
                    .push(&body.as_bytes()[split..])
                    .expect("second part"),
            );
            assert_eq!(
                names(&events),
                ["a", "bookmark 9", "error Some(410)"],
                "split at {split}"
            );
        }
    }

    #[test]
    fn a_last_event_without_newline_is_kept_for_finish() {
        let mut decoder = WatchDecoder::new();
        let events: Vec<WatchEvent<FlowSchema>> = decoder.push(ADDED.as_bytes()).expect("ok");
        assert!(events.is_empty());
        let last: Option<WatchEvent<FlowSchema>> = decoder.finish().expect("ok");
        assert_eq!(names(&[last.expect("event")]), ["a"]);
    }

    #[test]
    fn garbage_and_oversized_lines_are_errors() {
        let mut decoder = WatchDecoder::new();
        let garbage: Result<Vec<WatchEvent<FlowSchema>>, _> = decoder.push(b"not json\n");
        assert!(matches!(garbage, Err(WatchStreamError::Decode(_))));
        let mut decoder = WatchDecoder::new();
        let wrong_kind = r#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1"}}"#;
        let result: Result<Vec<WatchEvent<FlowSchema>>, _> =
            decoder.push(format!("{wrong_kind}\n").as_bytes());
        assert!(
            matches!(result, Err(WatchStreamError::Decode(_))),
            "{result:?}"
        );
        let mut decoder = WatchDecoder::new();
        let big = vec![b'x'; MAX_EVENT_BYTES + 1];
        let result: Result<Vec<WatchEvent<FlowSchema>>, _> = decoder.push(&big);
        assert_eq!(result.err(), Some(WatchStreamError::TooLarge));
    }
}
