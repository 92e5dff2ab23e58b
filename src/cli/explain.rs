//! `kube-apf-proxy classify --method M --url URL ... --explain [--output text|json]`: why one
//! request is classified as it is ([`crate::classify::explain()`]), then the verdict.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

use super::classify::{identity_of, request_target, Classifier, DEFAULT_SERVER_CONCURRENCY_LIMIT};
use super::lint::Output;
use super::ClassifyInput;
use crate::classify::{classify, explain, Explanation};
use crate::config::Config;
use crate::request_info::{self, RequestInfo};

/// The JSON form: the explanation and the verdict.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explained {
    /// The request's attributes.
    pub request_info: RequestInfo,
    /// The schemas tried and why each matched or not.
    #[serde(flatten)]
    pub explanation: Explanation,
    /// The chosen FlowSchema.
    pub flow_schema: String,
    /// Its priority level.
    pub priority_level: String,
    /// The flow distinguisher.
    pub flow_distinguisher: String,
    /// Whether the level is exempt.
    pub exempt: bool,
    /// The queues the flow is dealt, when the level shuffle-shards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hand: Option<Vec<usize>>,
    /// The seats the request would occupy.
    pub seats: u32,
}

/// Explains one request against `config`, with seats at `server_cl`; `Err` with a message when
/// the URL does not parse.
pub fn explain_request(
    config: &Config,
    input: &ClassifyInput,
    server_cl: u32,
) -> Result<Explained, String> {
    let target = request_target(&input.url);
    let info = request_info::parse(&input.method, target).map_err(|e| e.to_string())?;
    let identity = identity_of(input);
    let explanation = explain(config, &identity, &info);
    let class = classify(config, &identity, &info);
    let chosen = explanation.flow_schemas.last().map(|t| t.name.as_str());
    debug_assert_eq!(
        chosen,
        Some(class.flow_schema.name.as_str()),
        "explain agrees with classify"
    );
    let query = target.split_once('?').map(|(_, q)| q);
    let seats = Classifier::new(config, server_cl).seats(&info, query, &class);
    Ok(Explained {
        explanation,
        flow_schema: class.flow_schema.name.clone(),
        priority_level: class.priority_level.name.clone(),
        flow_distinguisher: class.flow_distinguisher.clone(),
        exempt: class.is_exempt(),
        hand: class.hand().map(|h| h.as_slice().to_vec()),
        seats,
        request_info: info,
    })
}

impl Explained {
    /// The text form: the schemas tried, then one verdict line.
    pub fn to_text(&self) -> String {
        let mut text = self.explanation.to_text(&self.request_info);
        let hand = self
            .hand
            .as_ref()
            .map(|h| format!(", hand {h:?}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "=> FlowSchema {}, priority level {}{}, flow distinguisher {:?}{hand}, {} seat(s)\n",
            self.flow_schema,
            self.priority_level,
            if self.exempt { " (exempt)" } else { "" },
            self.flow_distinguisher,
            self.seats
        ));
        text
    }
}

/// Runs the command: exit 0, or 1 when the request does not parse.
pub fn run(
    config_dir: Option<&Path>,
    input: &ClassifyInput,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let config = match super::load_config(config_dir) {
        Ok(config) => config,
        Err(super::LoadFailure::Invalid) => return Ok(ExitCode::from(2)),
        Err(super::LoadFailure::Io(e)) => return Err(e.into()),
    };
    let mut out = std::io::stdout().lock();
    match explain_request(&config, input, DEFAULT_SERVER_CONCURRENCY_LIMIT) {
        Ok(explained) => {
            match output {
                Output::Text => out.write_all(explained.to_text().as_bytes())?,
                Output::Json => {
                    serde_json::to_writer_pretty(&mut out, &explained)?;
                    writeln!(out)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("error: {message}");
            Ok(ExitCode::from(1))
        }
    }
}

/// The request a `/debug/api_priority_and_fairness/explain` query describes:
/// `?url=PATH&method=GET&user=U&group=G&group=G2&uid=I` (`method` defaults to `GET`; without
/// `user` the caller is anonymous).
pub fn input_from_query(query: &str) -> Result<ClassifyInput, String> {
    let mut input = ClassifyInput {
        method: "GET".to_string(),
        ..Default::default()
    };
    for (key, value) in crate::fairqueue::work_estimate::parse_query(query) {
        match key.as_str() {
            "url" => input.url = value,
            "method" => input.method = value,
            "user" => input.user = Some(value),
            "group" => input.groups.push(value),
            "uid" => input.uid = value,
            _ => {
                return Err(format!(
                    "unknown parameter {key:?}: use url, method, user, group, uid"
                ))
            }
        }
    }
    if input.url.is_empty() {
        return Err("the url parameter is required (the request's path and query)".to_string());
    }
    Ok(input)
}
