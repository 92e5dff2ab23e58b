//! `simulate --object-counts`: how many objects of each resource the apiserver stores, and how
//! large they are, for the list work estimate.

use std::collections::BTreeMap;

use crate::fairqueue::work_estimate::ObjectStats;

/// One resource's entry: a count, or a count with the average object size.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Entry {
    Count(u64),
    #[serde(rename_all = "camelCase")]
    Stats {
        count: u64,
        #[serde(default)]
        average_object_size_bytes: u64,
    },
}

/// Parses a YAML or JSON map from resource (`pods`, `deployments.apps`) to the number of stored
/// objects, as the apiserver's `apiserver_storage_objects` gives them, or to
/// `{count, averageObjectSizeBytes}` (the size as its `apiserver_resource_size_estimate_bytes`
/// gives it: without it a list is costed as if each object had the largest size).
pub fn parse(text: &str) -> Result<Vec<(String, ObjectStats)>, crate::yaml::Error> {
    let counts: BTreeMap<String, Entry> = crate::yaml::from_str(text)?;
    Ok(counts
        .into_iter()
        .map(|(resource, entry)| {
            let (object_count, average_object_size_bytes) = match entry {
                Entry::Count(count) => (count, 0),
                Entry::Stats {
                    count,
                    average_object_size_bytes,
                } => (count, average_object_size_bytes),
            };
            let stats = ObjectStats {
                object_count,
                average_object_size_bytes,
            };
            (resource, stats)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_counts_and_counts_with_sizes() {
        let parsed = parse("pods: 5000\nconfigmaps: {count: 500, averageObjectSizeBytes: 400}\n")
            .expect("valid");
        let got: Vec<_> = parsed
            .iter()
            .map(|(r, s)| (r.as_str(), s.object_count, s.average_object_size_bytes))
            .collect();
        assert_eq!(got, [("configmaps", 500, 400), ("pods", 5000, 0)]);
    }

    #[test]
    fn refuses_what_is_not_a_map_of_counts() {
        assert!(parse("pods: many\n").is_err());
        assert!(parse("- pods\n").is_err());
    }
}
