//! `check_body_size`: which requests the declared-length limit applies to.

use http::HeaderMap;

use super::check_body_size;
use crate::request_info;

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
