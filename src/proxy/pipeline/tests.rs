//! `check_body_size`: which requests the declared-length limit applies to; `set_pf_headers`:
//! the proxy's APF headers beside the upstream's.

use http::{HeaderMap, HeaderValue};

use super::{check_body_size, set_pf_headers, FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER};
use crate::request_info;

#[test]
fn the_proxys_apf_headers_come_first_and_the_upstreams_follow() {
    let config = crate::config::bootstrap();
    let flow_schema = config.catch_all().clone();
    let priority_level = config
        .priority_level(&flow_schema.priority_level)
        .expect("catch-all level")
        .clone();
    let values = |headers: &HeaderMap, name| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().expect("ascii").to_string())
            .collect()
    };

    // A response of the proxy's own, or from an upstream without APF: the proxy's values only.
    let mut own = HeaderMap::new();
    set_pf_headers(&mut own, &flow_schema, &priority_level);
    assert_eq!(
        values(&own, &FLOW_SCHEMA_UID_HEADER),
        [flow_schema.uid.as_str()]
    );
    assert_eq!(
        values(&own, &PRIORITY_LEVEL_UID_HEADER),
        [priority_level.uid.as_str()]
    );

    // An apiserver's response carries its own classification: both, the proxy's first.
    let mut forwarded = HeaderMap::new();
    forwarded.insert(
        FLOW_SCHEMA_UID_HEADER.clone(),
        HeaderValue::from_static("apiserver-fs"),
    );
    forwarded.insert(
        PRIORITY_LEVEL_UID_HEADER.clone(),
        HeaderValue::from_static("apiserver-pl"),
    );
    set_pf_headers(&mut forwarded, &flow_schema, &priority_level);
    assert_eq!(
        values(&forwarded, &FLOW_SCHEMA_UID_HEADER),
        [flow_schema.uid.clone(), "apiserver-fs".to_string()]
    );
    assert_eq!(
        values(&forwarded, &PRIORITY_LEVEL_UID_HEADER),
        [priority_level.uid.clone(), "apiserver-pl".to_string()]
    );
}

#[test]
fn only_writes_declaring_more_than_the_limit_get_413() {
    const LIMIT: u64 = 100;
    // (method, target, Content-Length, limit, refused)
    let cases: [(&str, &str, Option<&str>, u64, bool); 11] = [
        (
            "POST",
            "/api/v1/namespaces/ns/pods",
            Some("101"),
            LIMIT,
            true,
        ),
        (
            "POST",
            "/api/v1/namespaces/ns/pods",
            Some("100"),
            LIMIT,
            false,
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns/pods/p",
            Some("101"),
            LIMIT,
            true,
        ),
        (
            "PATCH",
            "/api/v1/namespaces/ns/pods/p",
            Some("101"),
            LIMIT,
            true,
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns/pods/p",
            Some("101"),
            LIMIT,
            true,
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns/pods",
            Some("101"),
            LIMIT,
            true,
        ),
        // Reads and non-resource requests are not read through limitedReadBody.
        (
            "GET",
            "/api/v1/namespaces/ns/pods/p",
            Some("101"),
            LIMIT,
            false,
        ),
        ("POST", "/some/non/resource", Some("101"), LIMIT, false),
        // No (chunked) or unparsable length: left to the upstream.
        ("POST", "/api/v1/namespaces/ns/pods", None, LIMIT, false),
        (
            "POST",
            "/api/v1/namespaces/ns/pods",
            Some("lots"),
            LIMIT,
            false,
        ),
        // 0 disables the check.
        ("POST", "/api/v1/namespaces/ns/pods", Some("101"), 0, false),
    ];
    for (method, target, length, limit, refused) in cases {
        let info = request_info::parse(method, target).expect("request info");
        let mut headers = HeaderMap::new();
        if let Some(length) = length {
            headers.insert(http::header::CONTENT_LENGTH, length.parse().expect("value"));
        }
        let result = check_body_size(&info, &headers, limit);
        assert_eq!(
            result.is_err(),
            refused,
            "{method} {target} {length:?} {limit}"
        );
        if let Err(err) = result {
            assert_eq!(
                err.to_string(),
                format!("Request entity too large: limit is {limit}")
            );
        }
    }
}
