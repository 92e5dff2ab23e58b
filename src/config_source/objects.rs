//! The cluster's flow-control objects as last listed and watched, and their conversion into the
//! proxy's configuration: the ONE place where k8s-openapi's `flowcontrol::v1` types become our
//! model. They are written back as a `FlowSchemaList` and a `PriorityLevelConfigurationList`
//! (JSON) and go through the loader that reads files (`config::load::load_sources_as_stored`: parse →
//! default → validate → resolve), so a cluster object is judged exactly as the same object in a
//! file, and problems name it (`<cluster>/flowschemas: FlowSchema/NAME: spec...: message`).

use std::collections::BTreeMap;

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, WatchEvent};
use k8s_openapi::{List, ListableResource, Metadata};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::config::load::{load_sources_as_stored, SourceFile};
use crate::config::parse::Format;
use crate::config::{ConfigError, Loaded};

/// One of the two kinds the source lists and watches.
pub trait Kind:
    ListableResource
    + Metadata<Ty = ObjectMeta>
    + DeserializeOwned
    + Serialize
    + Clone
    + Send
    + Sync
    + 'static
{
    /// This kind's objects in `objects`.
    fn of(objects: &mut ClusterObjects) -> &mut BTreeMap<String, Self>;
}

impl Kind for FlowSchema {
    fn of(objects: &mut ClusterObjects) -> &mut BTreeMap<String, Self> {
        &mut objects.flow_schemas
    }
}

impl Kind for PriorityLevelConfiguration {
    fn of(objects: &mut ClusterObjects) -> &mut BTreeMap<String, Self> {
        &mut objects.priority_levels
    }
}

/// The collection path of `K` (`/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas`).
pub fn collection_path<K: Kind>() -> String {
    format!("/apis/{}/{}", K::API_VERSION, K::URL_PATH_SEGMENT)
}

/// The name the loader's problems give the objects of `K`.
pub fn source_name<K: Kind>() -> String {
    format!("<cluster>/{}", K::URL_PATH_SEGMENT)
}

/// Both kinds' objects, by name.
#[derive(Debug, Clone, Default)]
pub struct ClusterObjects {
    /// `flowschemas`.
    pub flow_schemas: BTreeMap<String, FlowSchema>,
    /// `prioritylevelconfigurations`.
    pub priority_levels: BTreeMap<String, PriorityLevelConfiguration>,
}

/// What a watch event did to the objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// An object was added, changed or deleted: the configuration must be loaded again.
    Changed,
    /// A bookmark: only the resource version moved.
    Bookmark,
    /// The watch's resource version is too old (`410 Gone`, `Expired`): list again.
    Expired,
    /// Any other error event: watch again from the last resource version.
    Error(String),
}

// === impl ClusterObjects ===

impl ClusterObjects {
    /// Replaces every object of `K` with a list's items.
    pub fn replace<K: Kind>(&mut self, items: Vec<K>) {
        let map = K::of(self);
        map.clear();
        for item in items {
            let name = item.metadata().name.clone().unwrap_or_default();
            map.insert(name, item);
        }
    }

    /// Applies one watch event of `K`; `resource_version` follows the event's object.
    pub fn apply<K: Kind>(
        &mut self,
        event: WatchEvent<K>,
        resource_version: &mut String,
    ) -> Applied {
        match event {
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                note_version(&object, resource_version);
                let name = object.metadata().name.clone().unwrap_or_default();
                K::of(self).insert(name, object);
                Applied::Changed
            }
            WatchEvent::Deleted(object) => {
                note_version(&object, resource_version);
                let name = object.metadata().name.clone().unwrap_or_default();
                K::of(self).remove(&name);
                Applied::Changed
            }
            WatchEvent::Bookmark {
                resource_version: rv,
                ..
            } => {
                *resource_version = rv;
                Applied::Bookmark
            }
            WatchEvent::ErrorStatus(status) => {
                if status.code == Some(410) || status.reason.as_deref() == Some("Expired") {
                    Applied::Expired
                } else {
                    Applied::Error(status.message.unwrap_or_default())
                }
            }
            WatchEvent::ErrorOther(_) => Applied::Error("an error event".to_string()),
        }
    }

    /// How many objects of each kind: `(flowschemas, prioritylevelconfigurations)`.
    pub fn counts(&self) -> (usize, usize) {
        (self.flow_schemas.len(), self.priority_levels.len())
    }

    /// The objects as the two "files" the loader reads.
    pub fn sources(&self) -> Vec<SourceFile> {
        vec![
            list_source(self.priority_levels.values()),
            list_source(self.flow_schemas.values()),
        ]
    }

    /// Loads the objects as the configuration in force would be: every problem reported, the
    /// mandatory objects implied, dangling FlowSchemas warned about and skipped, the objects
    /// otherwise as stored (the cluster's own ensurer maintains its suggested objects).
    pub fn load(&self) -> Result<Loaded, ConfigError> {
        load_sources_as_stored(&self.sources())
    }
}

fn note_version<K: Kind>(object: &K, resource_version: &mut String) {
    if let Some(rv) = &object.metadata().resource_version {
        resource_version.clone_from(rv);
    }
}

fn list_source<'a, K: Kind>(items: impl Iterator<Item = &'a K>) -> SourceFile {
    let list = List::<K> {
        items: items.cloned().collect(),
        metadata: ListMeta::default(),
    };
    // Serializing objects that were just deserialized cannot fail; an empty list would drop
    // them, and the loader would then refuse the dangling references, never apply silently.
    let bytes = serde_json::to_vec(&list).unwrap_or_default();
    SourceFile {
        name: source_name::<K>(),
        bytes,
        format: Format::Json,
    }
}

#[cfg(test)]
mod tests;
