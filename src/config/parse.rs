//! Parsing of one file's text into raw objects: multi-document YAML or a JSON stream; single
//! objects, `FlowSchemaList`, `PriorityLevelConfigurationList` and `v1 List`; all five versions.
//!
//! Objects of other kinds are warned about and skipped; a FlowSchema or PriorityLevelConfiguration
//! of a version we do not read is an error. Syntax errors name the line.

pub mod prescan;

use crate::yaml::{Mapping, Value};

use super::field::{go_quote, FieldError};
use super::raw::{decode_object, ApiVersion, RawObject, GROUP};
use super::Problem;

/// How a file is written, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.yaml` / `.yml`: documents separated by `---`.
    Yaml,
    /// `.json`: one or more concatenated JSON values.
    Json,
}

/// Where an object came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::config) struct Origin {
    /// The file, as it is named in problems.
    pub file: String,
    /// The document in the file, from 1.
    pub document: usize,
    /// The index in the list's `items`, when the object is in a list.
    pub item: Option<usize>,
}

impl Origin {
    /// `KIND/NAME`, or `KIND/<unnamed: document N items[I]>` for an object without a name.
    pub fn label(&self, kind: &str, name: &str) -> String {
        if !name.is_empty() {
            return format!("{kind}/{name}");
        }
        match self.item {
            Some(i) => format!("{kind}/<unnamed: document {} items[{i}]>", self.document),
            None => format!("{kind}/<unnamed: document {}>", self.document),
        }
    }

    /// `document N` or `document N items[I]`.
    fn place(&self) -> String {
        match self.item {
            Some(i) => format!("document {} items[{i}]", self.document),
            None => format!("document {}", self.document),
        }
    }
}

/// One decoded object with where it came from and the problems found while decoding it.
#[derive(Debug, Clone)]
pub(in crate::config) struct ParsedObject {
    /// Where it came from.
    pub origin: Origin,
    /// The object, with zero values where decoding failed.
    pub object: RawObject,
    /// Unknown fields and values of the wrong type.
    pub decode_errors: Vec<FieldError>,
}

/// What one file holds.
#[derive(Debug, Default)]
pub(in crate::config) struct ParsedFile {
    /// The objects of the two kinds we know.
    pub objects: Vec<ParsedObject>,
    /// Errors that are not about one object (syntax, documents that are not objects).
    pub problems: Vec<Problem>,
    /// Objects skipped because of their kind or version.
    pub warnings: Vec<Problem>,
}

/// Splits `text` into documents and decodes every object in them.
pub(in crate::config) fn parse_file(file: &str, text: &str, format: Format) -> ParsedFile {
    let mut out = ParsedFile::default();
    // Bounded before the parser sees it: serde_yaml reads every event of a document before it
    // checks its depth (see `prescan`). Size is bounded where the text comes from a stranger
    // (the webhook).
    if let Err(e) = prescan::check_depth(text) {
        let what = match format {
            Format::Yaml => "YAML",
            Format::Json => "JSON",
        };
        out.problems
            .push(Problem::new(file, "", format!("invalid {what}: {e}")));
        return out;
    }
    let documents = match format {
        Format::Yaml => yaml_documents(text),
        Format::Json => json_documents(text),
    };
    let (documents, syntax_error) = documents;
    for (i, doc) in documents.iter().enumerate() {
        let origin = Origin {
            file: file.to_string(),
            document: i + 1,
            item: None,
        };
        parse_document(doc, origin, &mut out);
    }
    if let Some(msg) = syntax_error {
        out.problems.push(Problem::new(file, "", msg));
    }
    out
}

/// The documents before the first syntax error, and that error.
fn yaml_documents(text: &str) -> (Vec<Value>, Option<String>) {
    let mut docs = Vec::new();
    for doc in crate::yaml::documents(text) {
        match doc {
            Ok(mut v) => {
                // `<<` merge keys, which the apiserver's YAML decoder also applies.
                if let Err(e) = v.apply_merge() {
                    return (docs, Some(format!("invalid YAML merge key: {e}")));
                }
                docs.push(v);
            }
            // After a syntax error the rest of the stream cannot be trusted.
            Err(e) => return (docs, Some(format!("invalid YAML: {e}"))),
        }
    }
    (docs, None)
}

fn json_documents(text: &str) -> (Vec<Value>, Option<String>) {
    let mut docs = Vec::new();
    for v in serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>() {
        let converted = v
            .map_err(|e| format!("invalid JSON: {e}"))
            .and_then(|v| crate::yaml::to_value(v).map_err(|e| format!("invalid JSON: {e}")));
        match converted {
            Ok(v) => docs.push(v),
            Err(e) => return (docs, Some(e)),
        }
    }
    (docs, None)
}

fn str_field<'v>(map: &'v Mapping, key: &str) -> Option<&'v str> {
    map.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn parse_document(doc: &Value, origin: Origin, out: &mut ParsedFile) {
    let map = match doc {
        Value::Null => return,
        Value::Mapping(map) => map,
        _ => {
            let msg = "expected a Kubernetes object (a mapping with apiVersion and kind)";
            out.problems
                .push(Problem::new(&origin.file, &origin.place(), msg.into()));
            return;
        }
    };
    let (Some(api_version), Some(kind)) = (str_field(map, "apiVersion"), str_field(map, "kind"))
    else {
        let missing = if str_field(map, "apiVersion").is_none() {
            "apiVersion"
        } else {
            "kind"
        };
        let msg = format!("Object '{missing}' is missing");
        out.problems
            .push(Problem::new(&origin.file, &origin.place(), msg));
        return;
    };
    let version = ApiVersion::parse(api_version);
    match (api_version, kind, version) {
        ("v1", "List", _) => parse_items(map, &origin, None, out),
        (_, "FlowSchemaList", Some(v)) => {
            parse_items(map, &origin, Some((v, "FlowSchema")), out);
        }
        (_, "PriorityLevelConfigurationList", Some(v)) => {
            parse_items(map, &origin, Some((v, "PriorityLevelConfiguration")), out);
        }
        (_, _, Some(v)) if kind == "FlowSchema" || kind == "PriorityLevelConfiguration" => {
            parse_object(doc, kind, v, origin, out);
        }
        // A flow-control object in a version we cannot read would silently drop out of the
        // configuration: an error that names the version, never a warning.
        _ if api_version.starts_with(&format!("{GROUP}/")) && is_flow_control_kind(kind) => {
            let msg = format!(
                "apiVersion: Unsupported value: {}: {kind} is read in {GROUP} v1, v1beta3, \
                 v1beta2, v1beta1 and v1alpha1",
                go_quote(api_version)
            );
            out.problems
                .push(Problem::new(&origin.file, &origin.place(), msg));
        }
        _ => {
            let msg = format!(
                "ignoring {api_version}/{kind}: only FlowSchema and PriorityLevelConfiguration \
                 of {GROUP} v1, v1beta3, v1beta2, v1beta1 and v1alpha1 are read"
            );
            out.warnings
                .push(Problem::new(&origin.file, &origin.place(), msg));
        }
    }
}

fn is_flow_control_kind(kind: &str) -> bool {
    matches!(
        kind,
        "FlowSchema"
            | "PriorityLevelConfiguration"
            | "FlowSchemaList"
            | "PriorityLevelConfigurationList"
    )
}

fn parse_object(
    doc: &Value,
    kind: &str,
    version: ApiVersion,
    origin: Origin,
    out: &mut ParsedFile,
) {
    if let Some((object, decode_errors)) = decode_object(doc, kind, version) {
        out.objects.push(ParsedObject {
            origin,
            object,
            decode_errors,
        });
    }
}

/// The items of a list. A typed list's items may leave out `apiVersion` and `kind` (the API
/// server's list responses do); they are then those of the list.
fn parse_items(
    map: &Mapping,
    origin: &Origin,
    typed: Option<(ApiVersion, &str)>,
    out: &mut ParsedFile,
) {
    for key in map.keys() {
        let known = ["apiVersion", "kind", "metadata", "items"];
        if !key.as_str().is_some_and(|k| known.contains(&k)) {
            let name = key.as_str().map_or_else(|| format!("{key:?}"), go_quote);
            let msg = format!("unknown field {name} in a list");
            out.problems
                .push(Problem::new(&origin.file, &origin.place(), msg));
        }
    }
    let items = match map.get("items") {
        None | Some(Value::Null) => return,
        Some(Value::Sequence(items)) => items,
        Some(_) => {
            let msg = "items: expected a list".to_string();
            out.problems
                .push(Problem::new(&origin.file, &origin.place(), msg));
            return;
        }
    };
    for (i, item) in items.iter().enumerate() {
        let origin = Origin {
            item: Some(i),
            ..origin.clone()
        };
        match (typed, item) {
            (Some((version, kind)), Value::Mapping(m)) => {
                let mut m = m.clone();
                if str_field(&m, "apiVersion").is_none() {
                    m.insert("apiVersion".into(), version.to_string().into());
                }
                if str_field(&m, "kind").is_none() {
                    m.insert("kind".into(), kind.into());
                }
                parse_document(&Value::Mapping(m), origin, out);
            }
            _ => parse_document(item, origin, out),
        }
    }
}
