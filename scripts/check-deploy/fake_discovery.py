#!/usr/bin/env python3
"""A stand-in for an API server's discovery, so `kubectl apply --dry-run=client` runs offline.

kubectl needs discovery (which resource a kind maps to, whether it is namespaced) and GETs each
object to compute its patch. This serves the legacy discovery documents for the kinds deploy/
uses (the core group, apps, policy, RBAC, and the prometheus-operator ServiceMonitor and PrometheusRule CRDs as if installed) and
answers 404 to every object, so every object is "created (dry run)". It validates nothing itself:
kubectl parses every document and maps every kind; an unknown kind or a malformed document fails.

Usage: fake_discovery.py PORTFILE  (binds 127.0.0.1:0 and writes the port to PORTFILE)
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# group/version -> [(resource, kind, namespaced)]
RESOURCES = {
    "v1": [
        ("configmaps", "ConfigMap", True),
        ("namespaces", "Namespace", False),
        ("pods", "Pod", True),
        ("secrets", "Secret", True),
        ("serviceaccounts", "ServiceAccount", True),
        ("services", "Service", True),
    ],
    "rbac.authorization.k8s.io/v1": [
        ("clusterroles", "ClusterRole", False),
        ("clusterrolebindings", "ClusterRoleBinding", False),
        ("roles", "Role", True),
        ("rolebindings", "RoleBinding", True),
    ],
    "apps/v1": [
        ("deployments", "Deployment", True),
    ],
    "policy/v1": [
        ("poddisruptionbudgets", "PodDisruptionBudget", True),
    ],
    "monitoring.coreos.com/v1": [
        ("servicemonitors", "ServiceMonitor", True),
        ("prometheusrules", "PrometheusRule", True),
    ],
    "admissionregistration.k8s.io/v1": [
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
    ],
    "cert-manager.io/v1": [
        ("certificates", "Certificate", True),
        ("issuers", "Issuer", True),
    ],
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def resource_list(group_version):
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {"name": r, "singularName": "", "namespaced": ns, "kind": k, "verbs": VERBS}
            for (r, k, ns) in RESOURCES[group_version]
        ],
    }


def group_list():
    groups = []
    for gv in RESOURCES:
        if "/" not in gv:
            continue
        group, version = gv.split("/")
        ver = {"groupVersion": gv, "version": version}
        groups.append({"name": group, "versions": [ver], "preferredVersion": ver})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path == "/api":
            body = {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        elif path == "/apis":
            body = group_list()
        elif path == "/api/v1":
            body = resource_list("v1")
        elif path.startswith("/apis/") and path[len("/apis/"):] in RESOURCES:
            body = resource_list(path[len("/apis/"):])
        elif path == "/version":
            body = {"major": "1", "minor": "32", "gitVersion": "v1.32.0"}
        else:
            self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "reason": "NotFound", "code": 404, "message": "not found"})
            return
        self.reply(200, body)

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
