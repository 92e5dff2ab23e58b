#!/usr/bin/env bash
# Kubernetes' own "API priority and fairness" e2e specs (k8s.io/kubernetes test/e2e/apimachinery,
# flowcontrol.go, at the release the kube-apiserver harness pins) run through the proxy in front
# of the real kube-apiserver: the acceptance test of impersonation (issue 44). Loopback only;
# every wait is bounded.
#
#   scripts/apf-e2e.sh build
#       builds the suite (tests/apf-e2e/, Go modules only) into target/apf-e2e/apf-e2e.test,
#       again only when its go.mod, go.sum or *.go (or the Go version) changed.
#   scripts/apf-e2e.sh run [MODE...]
#       builds when needed, then, for each MODE (default: impersonate passthrough), starts the
#       proxy in front of the apiserver with --config-source cluster (the proxy classifies by the
#       apiserver's own FlowSchemas, which the specs create) and runs the three specs that are not
#       skipped upstream:
#         - classification by newly added FlowSchema and PriorityLevelConfiguration objects (it
#           impersonates users and compares the X-Kubernetes-PF-FlowSchema-UID and
#           -PriorityLevel-UID response headers with the objects it created);
#         - the FlowSchema and the PriorityLevelConfiguration API-operations conformance specs.
#       The two "drowned out" specs are skipped, as upstream skips them (kubernetes#96710).
#       MODE impersonate: the caller (the e2e framework) presents the admin's client certificate;
#       the proxy forwards with its own credentials and Impersonate-* headers.
#       MODE passthrough: the caller presents the admin's bearer token, which the proxy forwards.
#       Exits 0 when every spec passed in every mode. Per mode, DIR/MODE/ receives kubeconfig,
#       proxy.log, e2e.log and junit.xml.
#
# APF_E2E_APISERVER_DIR (optional): the directory of a kube-apiserver already started by
#   `scripts/kube-apiserver.sh start` (the Rust test passes its shared one); without it one is
#   started in DIR/apiserver and stopped at exit.
# APF_E2E_DIR (optional): DIR (default target/apf-e2e/runs/run-PID).
# KUBE_APF_PROXY_BIN (optional): the proxy binary (default target/debug/kube-apf-proxy).
# APF_E2E_BIN_DIR (optional): where the suite is cached (default target/apf-e2e).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tests/apf-e2e"
bin_dir="${APF_E2E_BIN_DIR:-$root/target/apf-e2e}"
bin="$bin_dir/apf-e2e.test"
# The release tests/apf-e2e/go.mod pins (the harness's, tests/kube-apiserver/go.mod).
k8s_version="v1.37.2"
# Bounds: a mode's whole suite (ginkgo's own timeout, then a hard kill a minute later), and the
# proxy's start (its /readyz waits for the first list of the apiserver's flow-control objects).
suite_timeout_s=600
proxy_ready_timeout_s=30

die() {
  echo "apf-e2e.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: scripts/apf-e2e.sh build | run [impersonate|passthrough...]" >&2
  exit 2
}

build() {
  command -v go >/dev/null 2>&1 || die "Go is not installed (needed to build the e2e suite from modules)"
  local stamp
  stamp="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go <(go version) "$0" | sha256sum | cut -d' ' -f1)"
  if [ -x "$bin" ] && [ "$(cat "$bin_dir/stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  grep -q "^[[:space:]]*k8s.io/kubernetes $k8s_version\$" "$src/go.mod" \
    || die "tests/apf-e2e/go.mod does not require k8s.io/kubernetes $k8s_version"
  mkdir -p "$bin_dir"
  echo "apf-e2e.sh: building the APF e2e suite of Kubernetes $k8s_version (first build: several minutes)" >&2
  local started=$SECONDS
  (
    cd "$src"
    go test -c -vet=off -mod=readonly -trimpath -buildvcs=false -ldflags "-s -w" -o "$bin.new" .
  ) || die "go test -c of tests/apf-e2e failed"
  mv "$bin.new" "$bin"
  echo "$stamp" >"$bin_dir/stamp"
  echo "apf-e2e.sh: built in $((SECONDS - started)) s: $bin" >&2
}

# kubeconfig FILE SERVER CA [client-certificate CERT KEY | token TOKEN]
kubeconfig() {
  local file=$1 server=$2 ca=$3 kind=$4 user
  case "$kind" in
    client-certificate)
      user="    client-certificate: $5
    client-key: $6" ;;
    token) user="    token: $5" ;;
    *) die "kubeconfig: unknown credential $kind" ;;
  esac
  (
    umask 077
    cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kube-apf-proxy
  cluster:
    server: $server
    certificate-authority: $ca
users:
- name: admin
  user:
$user
contexts:
- name: admin
  context:
    cluster: kube-apf-proxy
    user: admin
current-context: admin
EOF
  )
}

proxy_pid=""
started_apiserver=""
# Stops the proxy: SIGTERM, at most 30 s to drain and exit, then SIGKILL.
stop_proxy() {
  [ -n "$proxy_pid" ] || return 0
  kill "$proxy_pid" 2>/dev/null || true
  local n
  for n in $(seq 1 300); do
    kill -0 "$proxy_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$proxy_pid" 2>/dev/null || true
  wait "$proxy_pid" 2>/dev/null || true
  proxy_pid=""
}
cleanup() {
  stop_proxy
  [ -z "$started_apiserver" ] || "$root/scripts/kube-apiserver.sh" stop "$started_apiserver" || true
}

# ready PORT: whether the proxy's admin listener answers /readyz with 200 (bash alone, at most 5 s).
ready() {
  timeout 5 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
    IFS= read -r status <&3 && [[ $status == "HTTP/1."[01]" 200"* ]]' ready "$1" 2>/dev/null
}

# run_mode MODE: one run of the suite through the proxy in MODE; returns the suite's status.
run_mode() {
  local mode=$1 out="$base/$1"
  mkdir -p "$out"
  local caller=() forwarding=() impersonator
  case "$mode" in
    impersonate)
      # The caller's credential: the admin's client certificate (CN kubernetes-admin, O
      # system:masters), which only the proxy sees; the proxy forwards with its own token and
      # Impersonate-* headers, after asking the apiserver whether the caller may impersonate.
      caller=(client-certificate "$api/admin.crt" "$api/admin.key")
      impersonator=kubernetes-admin
      forwarding=(--identity-forwarding=impersonate --client-ca-file="$api/client-ca.crt") ;;
    passthrough)
      # The caller's credential: the admin's bearer token (tokens.csv), forwarded unchanged.
      caller=(token admin-token)
      impersonator=admin
      forwarding=(--identity-forwarding=passthrough --token-auth-file="$api/tokens.csv") ;;
    *) usage ;;
  esac
  local port admin_port
  port="$("$harness" free-port)"
  admin_port="$("$harness" free-port)"
  # The apiserver's serving certificate (127.0.0.1 is among its names) serves the proxy too, so
  # the kubeconfig trusts one CA.
  "$proxy_bin" serve \
    --bind-address=127.0.0.1 --secure-port="$port" --admin-address="127.0.0.1:$admin_port" \
    --tls-cert-file="$api/serving.crt" --tls-private-key-file="$api/serving.key" \
    --upstream="$server" --upstream-ca-file="$api/ca.crt" --upstream-token-file="$base/proxy-token" \
    --config-source=cluster "${forwarding[@]}" \
    --log-format=json -v=1 \
    >"$out/proxy.log" 2>&1 </dev/null &
  proxy_pid=$!
  local deadline=$((SECONDS + proxy_ready_timeout_s))
  until ready "$admin_port"; do
    kill -0 "$proxy_pid" 2>/dev/null || die "$mode: the proxy exited; see $out/proxy.log"
    [ "$SECONDS" -lt "$deadline" ] || die "$mode: the proxy is not ready after ${proxy_ready_timeout_s} s; see $out/proxy.log"
    sleep 0.1
  done
  kubeconfig "$out/kubeconfig" "https://127.0.0.1:$port" "$api/ca.crt" "${caller[@]}"

  echo "apf-e2e.sh: $mode: the specs through the proxy at https://127.0.0.1:$port in front of $server" >&2
  local started=$SECONDS status=0
  # --e2e-verify-service-account=false: the framework would wait for the namespace's "default"
  #   ServiceAccount, which the ServiceAccount controller creates; this harness runs no
  #   controller manager, so it never appears.
  # --delete-namespace=false: deleting a namespace finishes only when the namespace controller
  #   has emptied it; without one the framework would wait out its timeout after every spec.
  # The focus names the describe block; --ginkgo.skip leaves out the two specs upstream skips.
  KUBECONFIG=/dev/null HOME="$out" timeout --signal=TERM --kill-after=10 "$((suite_timeout_s + 60))" \
    "$bin" \
    -test.timeout="$((suite_timeout_s + 30))s" \
    --kubeconfig="$out/kubeconfig" \
    --e2e-verify-service-account=false \
    --delete-namespace=false \
    --ginkgo.focus='\[sig-api-machinery\] API priority and fairness' \
    --ginkgo.skip='drowned out' \
    --ginkgo.timeout="${suite_timeout_s}s" \
    --ginkgo.no-color \
    --ginkgo.v \
    --ginkgo.junit-report="$out/junit.xml" \
    >"$out/e2e.log" 2>&1 </dev/null || status=$?
  stop_proxy
  local elapsed=$((SECONDS - started))
  # Per spec: its name and ginkgo's verdict, from the JUnit report.
  if [ -f "$out/junit.xml" ]; then
    grep -o '<testcase name="[^"]*API priority and fairness[^"]*"[^>]*status="[a-z]*"' "$out/junit.xml" \
      | sed -e 's/^<testcase name="\[It\] //' -e 's/" .*status="/: /' -e 's/"$//' -e "s/&#39;/'/g" \
      | sed "s/^/apf-e2e.sh: $mode: /" >&2 || true
  fi
  grep -E '^(Ran [0-9]+ of|SUCCESS!|FAIL!)' "$out/e2e.log" | sed "s/^/apf-e2e.sh: $mode: /" >&2 || true
  if [ "$status" -ne 0 ]; then
    echo "apf-e2e.sh: $mode: FAILED (exit $status) in $elapsed s; see $out/e2e.log and $out/proxy.log" >&2
    return "$status"
  fi
  # Exactly the three: a focus that matched nothing would pass too.
  grep -q '^Ran 3 of ' "$out/e2e.log" || { echo "apf-e2e.sh: $mode: expected 3 specs to run; see $out/e2e.log" >&2; return 1; }
  # The UIDs the spec compared are the proxy's own classification (its X-Kubernetes-PF-* headers
  # come first, the apiserver's after them): its access log (-v=1) has the spec's impersonated
  # request as noxu in the spec's FlowSchema, with the admin as the impersonator.
  grep '"target":"kube_apf_proxy::access"' "$out/proxy.log" | grep '"user":"noxu"' \
    | grep '"flow_schema":"e2e-testing-flowschema"' | grep '"priority_level":"e2e-testing-prioritylevel"' \
    | grep -q "\"impersonator\":\"$impersonator\"" \
    || { echo "apf-e2e.sh: $mode: the proxy's access log has no request of noxu (impersonated by $impersonator) in e2e-testing-flowschema; see $out/proxy.log" >&2; return 1; }
  echo "apf-e2e.sh: $mode: passed in $elapsed s" >&2
}

run() {
  local modes=("$@")
  [ ${#modes[@]} -gt 0 ] || modes=(impersonate passthrough)
  proxy_bin="${KUBE_APF_PROXY_BIN:-$root/target/debug/kube-apf-proxy}"
  [ -x "$proxy_bin" ] || die "$proxy_bin missing: run cargo build first (or set KUBE_APF_PROXY_BIN)"
  harness="${KUBE_APISERVER_BIN_DIR:-$root/target/kube-apiserver}/kube-apiserver-harness"
  build
  base="${APF_E2E_DIR:-$bin_dir/runs/run-$$}"
  mkdir -p "$base"
  base="$(cd "$base" && pwd)"
  trap cleanup EXIT
  if [ -n "${APF_E2E_APISERVER_DIR:-}" ]; then
    api="$(cd "$APF_E2E_APISERVER_DIR" && pwd)"
    server="$(cat "$api/server")"
  else
    api="$base/apiserver"
    server="$(KUBE_APISERVER_OWNER_PID=$$ "$root/scripts/kube-apiserver.sh" start "$api")"
    started_apiserver=$api
  fi
  [ -x "$harness" ] || die "$harness missing: run scripts/kube-apiserver.sh build"
  local k=(kubectl --kubeconfig="$api/admin.kubeconfig" --cache-dir="$api/kube-cache" --request-timeout=30s)
  # The proxy's own identity, as deployed: deploy/rbac.yaml's ServiceAccount (SubjectAccessReviews,
  # impersonation, reading the flow-control objects) and a token of it.
  KUBECONFIG=/dev/null "${k[@]}" apply -f "$root/deploy/rbac.yaml" >/dev/null
  (
    umask 077
    KUBECONFIG=/dev/null "${k[@]}" -n kube-system create token kube-apf-proxy --duration=1h >"$base/proxy-token"
  )
  local failed=()
  for mode in "${modes[@]}"; do
    run_mode "$mode" || failed+=("$mode")
  done
  [ ${#failed[@]} -eq 0 ] || die "failed in: ${failed[*]}"
  echo "apf-e2e.sh: every spec passed in: ${modes[*]}" >&2
}

[ $# -ge 1 ] || usage
command="$1"
shift
case "$command" in
  build) [ $# -eq 0 ] || usage; build ;;
  run) run "$@" ;;
  *) usage ;;
esac
