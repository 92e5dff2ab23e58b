use super::*;

mod options;
mod properties;
mod selectors;
mod targets;

/// A one-line summary of the attributes that a table row pins.
///
/// Resource requests: `R {verb} {prefix}/{group}/{version} ns={ns} {resource}/{name}/{sub} [parts]`;
/// non-resource requests: `N {verb} prefix={prefix} path={path}`.
fn summary(info: &RequestInfo) -> String {
    if info.is_resource_request {
        format!(
            "R {} {}/{}/{} ns={} {}/{}/{} [{}]",
            info.verb,
            info.api_prefix,
            info.api_group,
            info.api_version,
            info.namespace,
            info.resource,
            info.name,
            info.subresource,
            info.parts.as_deref().unwrap_or_default().join(",")
        )
    } else {
        assert_eq!(info.parts, None, "non-resource requests have nil parts");
        format!(
            "N {} prefix={} path={}",
            info.verb, info.api_prefix, info.path
        )
    }
}

fn check(rows: &[(&str, &str, &str)]) {
    for &(method, target, want) in rows {
        let info = parse(method, target).unwrap_or_else(|e| panic!("{method} {target}: {e}"));
        assert_eq!(summary(&info), want, "{method} {target}");
    }
}

#[test]
fn non_resource_paths_keep_the_lowercased_method_as_verb() {
    check(&[
        ("GET", "/", "N get prefix= path=/"),
        ("GET", "/healthz", "N get prefix= path=/healthz"),
        ("POST", "/healthz/ping", "N post prefix= path=/healthz/ping"),
        ("GET", "/api", "N get prefix= path=/api"),
        ("GET", "/api/v1", "N get prefix= path=/api/v1"),
        ("GET", "/apis", "N get prefix= path=/apis"),
        ("GET", "/apis/apps", "N get prefix= path=/apis/apps"),
        ("OPTIONS", "/version", "N options prefix= path=/version"),
        ("HEAD", "/openapi/v2", "N head prefix= path=/openapi/v2"),
        (
            "GET",
            "/metrics/slis/extra",
            "N get prefix= path=/metrics/slis/extra",
        ),
        ("get", "/healthz", "N get prefix= path=/healthz"),
        ("Custom", "/x", "N custom prefix= path=/x"),
        // Three segments under an unknown prefix are not resources.
        ("GET", "/foo/v1/pods", "N get prefix= path=/foo/v1/pods"),
        ("GET", "/API/v1/pods", "N get prefix= path=/API/v1/pods"),
        // `*` (OPTIONS *) is a path of its own, as Go's url.ParseRequestURI gives it.
        ("OPTIONS", "*", "N options prefix= path=*"),
    ]);
}

#[test]
fn apis_with_fewer_than_four_segments_is_non_resource_but_keeps_the_prefix() {
    check(&[
        (
            "GET",
            "/apis/apps/v1",
            "N get prefix=apis path=/apis/apps/v1",
        ),
        (
            "GET",
            "/apis/v1/pods",
            "N get prefix=apis path=/apis/v1/pods",
        ),
        (
            "GET",
            "/apis/apps/v1/",
            "N get prefix=apis path=/apis/apps/v1/",
        ),
        ("GET", "/apis/apps", "N get prefix= path=/apis/apps"),
    ]);
}

#[test]
fn resource_paths_give_group_version_namespace_resource_name_subresource() {
    check(&[
        ("GET", "/api/v1/pods", "R list api//v1 ns= pods// [pods]"),
        (
            "GET",
            "/api/v1/namespaces/ns/pods",
            "R list api//v1 ns=ns pods// [pods]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/p",
            "R get api//v1 ns=ns pods/p/ [pods,p]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/p/log",
            "R get api//v1 ns=ns pods/p/log [pods,p,log]",
        ),
        (
            "POST",
            "/api/v1/namespaces/ns/pods/p/exec",
            "R create api//v1 ns=ns pods/p/exec [pods,p,exec]",
        ),
        (
            "GET",
            "/apis/apps/v1/deployments",
            "R list apis/apps/v1 ns= deployments// [deployments]",
        ),
        (
            "POST",
            "/apis/apps/v1/namespaces/ns/deployments",
            "R create apis/apps/v1 ns=ns deployments// [deployments]",
        ),
        (
            "PUT",
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            "R update apis/apps/v1 ns=ns deployments/d/scale [deployments,d,scale]",
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/ns/deployments/d/status",
            "R patch apis/apps/v1 ns=ns deployments/d/status [deployments,d,status]",
        ),
        (
            "DELETE",
            "/api/v1/nodes/n1",
            "R delete api//v1 ns= nodes/n1/ [nodes,n1]",
        ),
        (
            "GET",
            "/apis/stable.example.com/v1beta1/namespaces/ns/crontabs/c1",
            "R get apis/stable.example.com/v1beta1 ns=ns crontabs/c1/ [crontabs,c1]",
        ),
        // Parts beyond the subresource are kept but not interpreted.
        (
            "GET",
            "/api/v1/namespaces/ns/pods/p/proxy/a/b",
            "R get api//v1 ns=ns pods/p/proxy [pods,p,proxy,a,b]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/services/https:svc:443/proxy/x",
            "R get api//v1 ns=ns services/https:svc:443/proxy [services,https:svc:443,proxy,x]",
        ),
    ]);
}

#[test]
fn methods_map_to_verbs_case_sensitively() {
    check(&[
        (
            "POST",
            "/api/v1/nodes/n",
            "R create api//v1 ns= nodes/n/ [nodes,n]",
        ),
        (
            "GET",
            "/api/v1/nodes/n",
            "R get api//v1 ns= nodes/n/ [nodes,n]",
        ),
        (
            "HEAD",
            "/api/v1/nodes/n",
            "R get api//v1 ns= nodes/n/ [nodes,n]",
        ),
        (
            "PUT",
            "/api/v1/nodes/n",
            "R update api//v1 ns= nodes/n/ [nodes,n]",
        ),
        (
            "PATCH",
            "/api/v1/nodes/n",
            "R patch api//v1 ns= nodes/n/ [nodes,n]",
        ),
        (
            "DELETE",
            "/api/v1/nodes/n",
            "R delete api//v1 ns= nodes/n/ [nodes,n]",
        ),
        (
            "OPTIONS",
            "/api/v1/nodes/n",
            "R  api//v1 ns= nodes/n/ [nodes,n]",
        ),
        (
            "CONNECT",
            "/api/v1/nodes/n",
            "R  api//v1 ns= nodes/n/ [nodes,n]",
        ),
        (
            "get",
            "/api/v1/nodes/n",
            "R  api//v1 ns= nodes/n/ [nodes,n]",
        ),
        ("Get", "/api/v1/nodes", "R  api//v1 ns= nodes// [nodes]"),
        // HEAD on a collection is a list, like GET; OPTIONS on one stays "".
        ("HEAD", "/api/v1/pods", "R list api//v1 ns= pods// [pods]"),
        ("OPTIONS", "/api/v1/pods", "R  api//v1 ns= pods// [pods]"),
    ]);
}

#[test]
fn watch_and_proxy_path_prefixes_are_verbs() {
    check(&[
        (
            "GET",
            "/api/v1/watch/pods",
            "R watch api//v1 ns= pods// [pods]",
        ),
        (
            "GET",
            "/api/v1/watch/namespaces/ns/pods",
            "R watch api//v1 ns=ns pods// [pods]",
        ),
        (
            "GET",
            "/api/v1/watch/namespaces/ns/pods/p",
            "R watch api//v1 ns=ns pods/p/ [pods,p]",
        ),
        (
            "GET",
            "/apis/apps/v1/watch/namespaces/ns/deployments",
            "R watch apis/apps/v1 ns=ns deployments// [deployments]",
        ),
        // The method does not matter once the path names the verb.
        (
            "POST",
            "/api/v1/watch/pods",
            "R watch api//v1 ns= pods// [pods]",
        ),
        (
            "DELETE",
            "/api/v1/watch/pods",
            "R watch api//v1 ns= pods// [pods]",
        ),
        // A watch prefix keeps subresources; proxy never has one.
        (
            "GET",
            "/api/v1/watch/namespaces/ns/pods/p/status",
            "R watch api//v1 ns=ns pods/p/status [pods,p,status]",
        ),
        (
            "GET",
            "/api/v1/proxy/nodes/n1/some/path",
            "R proxy api//v1 ns= nodes/n1/ [nodes,n1,some,path]",
        ),
        (
            "PUT",
            "/api/v1/proxy/namespaces/ns/pods/p/x",
            "R proxy api//v1 ns=ns pods/p/ [pods,p,x]",
        ),
        // A watch prefix with a named object and ?watch= ignores the query.
        (
            "GET",
            "/api/v1/watch/pods?watch=false",
            "R watch api//v1 ns= pods// [pods]",
        ),
    ]);
}

#[test]
fn bare_watch_or_proxy_prefix_is_an_error() {
    for target in [
        "/api/v1/watch",
        "/api/v1/proxy",
        "/api/v1/watch/",
        "/apis/apps/v1/proxy",
        "/api/v1/watch?x=1",
    ] {
        assert_eq!(
            parse("GET", target),
            Err(RequestInfoError::NoKindAndNamespace(target.to_owned())),
            "{target}"
        );
    }
    let message = parse("GET", "/api/v1/watch")
        .expect_err("bare watch")
        .to_string();
    assert_eq!(
        message,
        "unable to determine kind and namespace from url, /api/v1/watch"
    );
}

#[test]
fn bare_watch_error_quotes_the_url_as_go_prints_it() {
    let cases = [
        ("/api/v1/watch?", "/api/v1/watch?"),
        ("/api/v%31/w%61tch", "/api/v%31/w%61tch"),
        ("/api/\"x\"/watch", "/api/%22x%22/watch"),
        ("/api/\u{e4}/proxy?a=\u{e4}", "/api/%C3%A4/proxy?a=\u{e4}"),
        ("/apis/g%2fv1/watch", "/apis/g%2fv1/watch"),
    ];
    for (target, url) in cases {
        assert_eq!(
            parse("GET", target),
            Err(RequestInfoError::NoKindAndNamespace(url.to_owned())),
            "{target}"
        );
    }
}

#[test]
fn namespaces_path_rules() {
    check(&[
        (
            "GET",
            "/api/v1/namespaces",
            "R list api//v1 ns= namespaces// [namespaces]",
        ),
        // The namespace object lives in itself.
        (
            "GET",
            "/api/v1/namespaces/ns1",
            "R get api//v1 ns=ns1 namespaces/ns1/ [namespaces,ns1]",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns1",
            "R delete api//v1 ns=ns1 namespaces/ns1/ [namespaces,ns1]",
        ),
        (
            "PUT",
            "/api/v1/namespaces/other/finalize",
            "R update api//v1 ns=other namespaces/other/finalize [namespaces,other,finalize]",
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns1/status",
            "R update api//v1 ns=ns1 namespaces/ns1/status [namespaces,ns1,status]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns1/status/x",
            "R get api//v1 ns=ns1 namespaces/ns1/status [namespaces,ns1,status,x]",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns1/finalizers",
            "R list api//v1 ns=ns1 finalizers// [finalizers]",
        ),
        // `namespaces` is only special right after the version (or the verb prefix).
        (
            "GET",
            "/api/v1/pods/namespaces/x",
            "R get api//v1 ns= pods/namespaces/x [pods,namespaces,x]",
        ),
        (
            "GET",
            "/apis/g/v1/namespaces/ns/namespaces",
            "R list apis/g/v1 ns=ns namespaces// [namespaces]",
        ),
    ]);
}

#[test]
fn serialises_like_the_classify_output() {
    let info = parse(
        "GET",
        "/api/v1/namespaces/ns/pods?watch=true&labelSelector=a%3Db",
    )
    .expect("watch");
    let json = serde_json::to_string(&info).expect("serialise");
    assert_eq!(
        json,
        r#"{"isResourceRequest":true,"path":"/api/v1/namespaces/ns/pods","verb":"watch","apiPrefix":"api","apiGroup":"","apiVersion":"v1","namespace":"ns","resource":"pods","subresource":"","name":"","parts":["pods"]}"#
    );
    let info = parse("GET", "/healthz").expect("healthz");
    let json = serde_json::to_string(&info).expect("serialise");
    assert_eq!(
        json,
        r#"{"isResourceRequest":false,"path":"/healthz","verb":"get","apiPrefix":"","apiGroup":"","apiVersion":"","namespace":"","resource":"","subresource":"","name":"","parts":null}"#
    );
}

#[test]
fn long_running_requests_are_watch_proxy_streaming_subresources_and_pprof() {
    let cases = [
        ("GET", "/api/v1/pods?watch=1", true),
        ("GET", "/api/v1/watch/pods", true),
        ("GET", "/api/v1/proxy/nodes/n1/x", true),
        ("POST", "/api/v1/namespaces/ns/pods/p/exec", true),
        ("GET", "/api/v1/namespaces/ns/pods/p/attach", true),
        ("GET", "/api/v1/namespaces/ns/pods/p/log", true),
        ("POST", "/api/v1/namespaces/ns/pods/p/portforward", true),
        ("GET", "/api/v1/namespaces/ns/services/s/proxy/x", true),
        ("GET", "/debug/pprof/profile", true),
        ("GET", "/api/v1/pods", false),
        ("GET", "/api/v1/namespaces/ns/pods/p", false),
        ("GET", "/api/v1/namespaces/ns/pods/p/status", false),
        ("GET", "/api/v1/namespaces/ns/pods/exec", false),
        ("GET", "/debug/pprof", false),
        ("GET", "/debug/pprofx/", false),
        ("GET", "/healthz", false),
        ("GET", "/logs/exec", false),
    ];
    for (method, target, want) in cases {
        let info = parse(method, target).expect(target);
        assert_eq!(is_long_running(&info), want, "{method} {target}");
    }
    // A non-resource request with a watch-like verb is long-running too (verb check only).
    let custom = RequestInfo {
        verb: "watch".into(),
        ..RequestInfo::default()
    };
    assert!(is_long_running(&custom));
}
