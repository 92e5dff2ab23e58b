#!/usr/bin/env bash
# The same APF configuration enforced by a real kube-apiserver alone, then by the proxy in front of
# it (the apiserver's limits raised so that the proxy's bind), under one overload pattern: a heavy
# flow (alice, HEAVY connections) and a light one (bob, LIGHT connections) in one priority level,
# both LISTing 500 ConfigMaps closed-loop for SECS seconds. Per flow: dispatched (2xx) and rejected
# (429) as the clients saw them, and the priority level's dispatched/rejected counters of whichever
# enforced. Loopback only, bounded (two apiserver starts, 2 × SECS of load).
#
#   cargo build --release && scripts/real-apf.sh [DIR]
#
# Knobs: SECS (15), HEAVY (48), LIGHT (4), MRI (100), MMRI (50): the limits (--max-requests-inflight,
# --max-mutating-requests-inflight) of whichever enforces; the other gets 3000 / 1000.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
base="${1:-$root/target/real-apf/run-$$}"
proxy_bin="$root/target/release/kube-apf-proxy"
harness="${KUBE_APISERVER_BIN_DIR:-$root/target/kube-apiserver}/kube-apiserver-harness"
oha="$(command -v oha || echo "$HOME/.cargo/bin/oha")"
secs="${SECS:-15}" heavy="${HEAVY:-48}" light="${LIGHT:-4}" mri="${MRI:-100}" mmri="${MMRI:-50}"

die() {
  echo "real-apf.sh: $*" >&2
  exit 1
}

[ -x "$proxy_bin" ] || die "$proxy_bin missing: run cargo build --release first"
[ -x "$oha" ] || die "oha not found"
mkdir -p "$base"
base="$(cd "$base" && pwd)"

proxy_pid=""
running=""
cleanup() {
  if [ -n "$proxy_pid" ]; then
    kill "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
  fi
  [ -z "$running" ] || "$root/scripts/kube-apiserver.sh" stop "$running" || true
}
trap cleanup EXIT

# One priority level of its own for alice and bob, distinguished by user.
config="$(cat "$root/scripts/real-apf-bench.yaml")"

# start DIR LIMIT_FLAGS...: an apiserver with the bench objects; sets $running and $server.
start_apiserver() {
  local dir=$1
  shift
  server="$(KUBE_APISERVER_OWNER_PID=$$ "$root/scripts/kube-apiserver.sh" start "$dir" -- "$@")"
  running=$dir
  k() { kubectl --kubeconfig="$dir/admin.kubeconfig" --cache-dir="$dir/kube-cache" "$@"; }
  k create namespace bench-list >/dev/null
  k create clusterrole bench-configmaps --verb=get,list,watch,create --resource=configmaps >/dev/null
  k create clusterrolebinding bench-configmaps --clusterrole=bench-configmaps --user=alice --user=bob >/dev/null
  python3 -c '
import json
items = [{"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": f"cm-{i:03d}", "namespace": "bench-list"},
          "data": {"key": f"value-{i}", "other": "x" * 64}} for i in range(500)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))' | k create -f - >/dev/null
  printf '%s' "$config" | k apply -f - >/dev/null
  # The apiserver's own object counts (the list work estimate) refresh each minute; wait for the
  # configuration to be in force (its FlowSchema's status condition Dangling=False).
  for _ in $(seq 1 100); do
    if k get flowschema bench -o jsonpath='{.status.conditions[?(@.type=="Dangling")].status}' 2>/dev/null | grep -q False; then
      break
    fi
    sleep 0.1
  done
}

stop_apiserver() {
  "$root/scripts/kube-apiserver.sh" stop "$running"
  running=""
}

# overload URL OUTDIR: the heavy and the light flow at once.
overload() {
  local url=$1 out=$2 path=/api/v1/namespaces/bench-list/configmaps
  "$oha" --no-tui --output-format json --insecure -z "${secs}s" -c "$heavy" \
    -H "Authorization: Bearer alice-token" "$url$path" >"$out/heavy.json" &
  local h=$!
  "$oha" --no-tui --output-format json --insecure -z "${secs}s" -c "$light" \
    -H "Authorization: Bearer bob-token" "$url$path" >"$out/light.json" &
  local l=$!
  wait "$h" "$l"
}

# bench_metrics FILE: the bench priority level's rows of a metrics text.
bench_metrics() {
  grep -E '^apiserver_flowcontrol_(dispatched|rejected)_requests_total\{[^}]*priority_level="bench"' "$1" || true
}

# 1. The apiserver alone enforcing, at MRI/MMRI.
dir="$base/apiserver-alone"
start_apiserver "$dir" --max-requests-inflight="$mri" --max-mutating-requests-inflight="$mmri"
echo "real-apf.sh: apiserver alone at $server (limits $mri/$mmri); waiting 65 s for its object counts" >&2
sleep 65
overload "$server" "$dir"
kubectl --kubeconfig="$dir/admin.kubeconfig" get --raw /metrics >"$dir/apiserver.metrics"
bench_metrics "$dir/apiserver.metrics" >"$dir/bench.metrics"
stop_apiserver

# 2. The proxy enforcing at MRI/MMRI (the same objects, read from the apiserver: --config-source
#    cluster), the apiserver at 3000/1000.
dir="$base/proxy"
start_apiserver "$dir" --max-requests-inflight=3000 --max-mutating-requests-inflight=1000
printf 'admin-token' >"$dir/proxy-token"
proxy_port="$("$harness" free-port)"
admin_port="$("$harness" free-port)"
"$proxy_bin" serve \
  --bind-address=127.0.0.1 --secure-port="$proxy_port" --admin-address="127.0.0.1:$admin_port" \
  --upstream="$server" --upstream-ca-file="$dir/ca.crt" --upstream-token-file="$dir/proxy-token" \
  --identity-forwarding=passthrough --token-auth-file="$dir/tokens.csv" \
  --config-source=cluster --max-requests-inflight="$mri" --max-mutating-requests-inflight="$mmri" \
  >"$dir/proxy.log" 2>&1 </dev/null &
proxy_pid=$!
for _ in $(seq 1 200); do
  curl -sf "http://127.0.0.1:$admin_port/readyz" >/dev/null 2>&1 && break
  kill -0 "$proxy_pid" 2>/dev/null || die "the proxy exited; see $dir/proxy.log"
  sleep 0.1
done
curl -sf "http://127.0.0.1:$admin_port/readyz" >/dev/null || die "the proxy is not ready; see $dir/proxy.log"
echo "real-apf.sh: proxy at https://127.0.0.1:$proxy_port (limits $mri/$mmri) in front of $server; waiting 65 s for object counts" >&2
sleep 65
overload "https://127.0.0.1:$proxy_port" "$dir"
curl -sf "http://127.0.0.1:$admin_port/metrics" >"$dir/proxy.metrics"
kubectl --kubeconfig="$dir/admin.kubeconfig" get --raw /metrics >"$dir/apiserver.metrics"
bench_metrics "$dir/proxy.metrics" >"$dir/bench.metrics"
bench_metrics "$dir/apiserver.metrics" >"$dir/apiserver-bench.metrics"
kill "$proxy_pid"
wait "$proxy_pid" 2>/dev/null || true
proxy_pid=""
stop_apiserver

python3 - "$base" "$secs" "$heavy" "$light" <<'EOF'
import json, sys
base, secs, heavy, light = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"| enforced by | flow (connections) | 2xx | 429 | other | 2xx/s | p50 ms (2xx and 429 alike) | p99 ms |")
print("|---|---|---|---|---|---|---|---|")
for who, sub in (("kube-apiserver alone", "apiserver-alone"), ("kube-apf-proxy", "proxy")):
    for flow, conc in (("heavy: alice", heavy), ("light: bob", light)):
        r = json.load(open(f"{base}/{sub}/{flow.split(':')[0]}.json"))
        codes = {str(k): v for k, v in r["statusCodeDistribution"].items()}
        ok = sum(v for k, v in codes.items() if k.startswith("2"))
        rej = codes.get("429", 0)
        other = sum(codes.values()) - ok - rej + sum(r.get("errorDistribution", {}).values())
        p = r["latencyPercentiles"]
        print(f"| {who} | {flow} ({conc}) | {ok} | {rej} | {other} | {ok / secs:.1f} | {p['p50'] * 1000:.1f} | {p['p99'] * 1000:.1f} |")
for sub, name in (("apiserver-alone", "bench.metrics"), ("proxy", "bench.metrics"), ("proxy", "apiserver-bench.metrics")):
    print(f"\n{sub}/{name}:")
    print(open(f"{base}/{sub}/{name}").read().strip() or "(no rows)")
EOF
