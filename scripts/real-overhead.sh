#!/usr/bin/env bash
# The proxy's overhead on real work: a real kube-apiserver (scripts/kube-apiserver.sh) measured
# directly and through the release proxy, side by side in one run, at the same offered load.
# Loopback only, bounded (about ROUNDS × (6 × 2 × SECS + 2 × watch samples) seconds).
#
#   cargo build --release && scripts/real-overhead.sh [DIR]
#
# Sets up, in the apiserver: namespace bench-get with one ConfigMap, bench-list with 500,
# bench-create (creates land there), bench-watch; a ClusterRole allowing get/list/watch/create of
# ConfigMaps bound to alice (tokens.csv: alice-token, group dev, so both the apiserver's APF and the
# proxy's classify her requests as global-default). The proxy: token passthrough (its
# --token-auth-file is the apiserver's tokens.csv), the embedded default configuration, TLS with its
# generated self-signed certificate (clients skip verification on both paths alike).
#
# Then, alternating direct / proxy in every round (scripts/real-overhead.py): GET of one ConfigMap,
# LIST of 500, create, each at a fixed rate (latency) and closed-loop at a fixed concurrency
# (throughput), and the latency from a create to its watch event; CPU per request of the proxy and
# of the apiserver from /proc/PID/stat. Knobs (environment): ROUNDS (3), SECS (8), PROTO (h1|h2),
# GET_RATE (200), LIST_RATE (20), CREATE_RATE (50), CONC (8), WATCH_SAMPLES (50), APISERVER_FLAGS
# (extra kube-apiserver flags, split on spaces), PLACEMENT (shared | split), REFERENCE (a
# space-separated list of nginx, haproxy: other proxies measured alike, as a reference for what
# any TLS-terminating hop costs on this machine; each with one worker, TLS in with the apiserver's
# serving certificate, TLS out to the apiserver over kept-alive HTTP/1.1, no logging, no
# buffering; they neither authenticate nor queue). Needs oha.
#
# PLACEMENT=shared (the default): the apiserver, the proxy and the load generator share every CPU,
# so the proxy's CPU comes out of the apiserver's. PLACEMENT=split: the apiserver (and its etcd)
# gets the first half of the CPUs, the proxy and the load generator the other half (taskset), as
# when the proxy runs as a sidecar with a CPU request of its own: the throughput ratio then says
# whether the proxy costs the apiserver requests, not whether both fit on the same cores.
# PROXY_CPUS (a taskset CPU list, e.g. 1): the proxy and the REFERENCE proxies run on those CPUs
# only. The proxy runs one worker per CPU it may use (a single-threaded scheduler on one), nginx
# and HAProxy one worker each: PROXY_CPUS=1 compares like with like.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/target/real-overhead/run-$$}"
proxy_bin="$root/target/release/kube-apf-proxy"
harness="${KUBE_APISERVER_BIN_DIR:-$root/target/kube-apiserver}/kube-apiserver-harness"
oha="$(command -v oha || echo "$HOME/.cargo/bin/oha")"

die() {
  echo "real-overhead.sh: $*" >&2
  exit 1
}

[ -x "$proxy_bin" ] || die "$proxy_bin missing: run cargo build --release first"
[ -x "$oha" ] || die "oha not found (cargo install oha, or ../shared/bench/setup.sh)"
command -v kubectl >/dev/null || die "kubectl not found"
command -v python3 >/dev/null || die "python3 not found"

proxy_pid=""
ref_pids=()
cleanup() {
  for pid in $proxy_pid "${ref_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  "$root/scripts/kube-apiserver.sh" stop "$dir" || true
}
trap cleanup EXIT

placement="${PLACEMENT:-shared}"
apiserver_cpus=() client_cpus=()
case "$placement" in
  shared) ;;
  split)
    command -v taskset >/dev/null || die "PLACEMENT=split needs taskset"
    ncpu="$(nproc)"
    [ "$ncpu" -ge 2 ] || die "PLACEMENT=split needs 2 CPUs or more (nproc: $ncpu)"
    half=$((ncpu / 2))
    apiserver_cpus=(taskset -c "0-$((half - 1))")
    client_cpus=(taskset -c "$half-$((ncpu - 1))")
    ;;
  *) die "PLACEMENT is shared or split, not $placement" ;;
esac

proxy_cpus=("${client_cpus[@]}")
if [ -n "${PROXY_CPUS:-}" ]; then
  command -v taskset >/dev/null || die "PROXY_CPUS needs taskset"
  proxy_cpus=(taskset -c "$PROXY_CPUS")
fi

extra=()
if [ -n "${APISERVER_FLAGS:-}" ]; then
  read -ra words <<<"$APISERVER_FLAGS"
  extra=(-- "${words[@]}")
fi
# The apiserver exits by itself should this script die without its trap.
server="$(KUBE_APISERVER_OWNER_PID=$$ "${apiserver_cpus[@]}" "$root/scripts/kube-apiserver.sh" start "$dir" "${extra[@]}")"
dir="$(cd "$dir" && pwd)"
echo "real-overhead.sh: kube-apiserver at $server ($dir), placement $placement${PROXY_CPUS:+, proxies on CPUs $PROXY_CPUS}" >&2

k() {
  kubectl --kubeconfig="$dir/admin.kubeconfig" --cache-dir="$dir/kube-cache" "$@"
}

for ns in bench-get bench-list bench-create bench-watch; do
  k create namespace "$ns" >/dev/null
done
k create clusterrole bench-configmaps --verb=get,list,watch,create --resource=configmaps >/dev/null
k create clusterrolebinding bench-configmaps --clusterrole=bench-configmaps --user=alice >/dev/null
k -n bench-get create configmap one --from-literal=key=value >/dev/null
python3 - <<'EOF' | k create -f - >/dev/null
import json
items = [
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i:03d}", "namespace": "bench-list", "labels": {"app": "bench"}},
        "data": {"key": f"value-{i}", "other": "x" * 64},
    }
    for i in range(500)
]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
EOF
count="$(k -n bench-list get configmaps -o name | wc -l)"
[ "$count" -eq 500 ] || die "bench-list holds $count ConfigMaps, expected 500"

proxy_port="$("$harness" free-port)"
admin_port="$("$harness" free-port)"
"${proxy_cpus[@]}" "$proxy_bin" serve \
  --bind-address=127.0.0.1 --secure-port="$proxy_port" \
  --admin-address="127.0.0.1:$admin_port" \
  --upstream="$server" --upstream-ca-file="$dir/ca.crt" \
  --identity-forwarding=passthrough --token-auth-file="$dir/tokens.csv" \
  >"$dir/proxy.log" 2>&1 </dev/null &
proxy_pid=$!
for _ in $(seq 1 100); do
  if curl -sf "http://127.0.0.1:$admin_port/readyz" >/dev/null 2>&1; then
    break
  fi
  kill -0 "$proxy_pid" 2>/dev/null || die "the proxy exited; see $dir/proxy.log"
  sleep 0.1
done
curl -sf "http://127.0.0.1:$admin_port/readyz" >/dev/null || die "the proxy is not ready after 10 s; see $dir/proxy.log"
echo "real-overhead.sh: proxy at https://127.0.0.1:$proxy_port (pid $proxy_pid)" >&2

refs=()
api_port="${server##*:}"
for ref in ${REFERENCE:-}; do
  port="$("$harness" free-port)"
  case "$ref" in
    nginx)
      command -v nginx >/dev/null || die "REFERENCE=nginx: nginx not found"
      mkdir -p "$dir/nginx"
      cat >"$dir/nginx/nginx.conf" <<EOF
worker_processes 1;
master_process off;
daemon off;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/nginx/body;
  proxy_temp_path $dir/nginx/proxy;
  upstream apiserver { server 127.0.0.1:$api_port; keepalive 64; }
  server {
    listen 127.0.0.1:$port ssl http2;
    ssl_certificate $dir/serving.crt;
    ssl_certificate_key $dir/serving.key;
    location / {
      proxy_pass https://apiserver;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_ssl_trusted_certificate $dir/ca.crt;
      proxy_ssl_verify on;
      proxy_ssl_name localhost;
      proxy_ssl_session_reuse on;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 1h;
    }
  }
}
EOF
      "${proxy_cpus[@]}" nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf" >"$dir/nginx/stderr.log" 2>&1 &
      ;;
    haproxy)
      command -v haproxy >/dev/null || die "REFERENCE=haproxy: haproxy not found"
      mkdir -p "$dir/haproxy"
      cat "$dir/serving.crt" "$dir/serving.key" >"$dir/haproxy/serving.pem"
      cat >"$dir/haproxy/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 8000
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 1h
    timeout server 1h
frontend fe
    bind 127.0.0.1:$port ssl crt $dir/haproxy/serving.pem alpn h2,http/1.1
    default_backend apiserver
backend apiserver
    server apiserver 127.0.0.1:$api_port ssl verify required ca-file $dir/ca.crt sni str(localhost) alpn http/1.1
EOF
      "${proxy_cpus[@]}" haproxy -db -f "$dir/haproxy/haproxy.cfg" >"$dir/haproxy/stderr.log" 2>&1 &
      ;;
    *) die "REFERENCE names nginx or haproxy, not $ref" ;;
  esac
  ref_pids+=($!)
  for _ in $(seq 1 50); do
    curl -sk -o /dev/null "https://127.0.0.1:$port/healthz" && break
    sleep 0.1
  done
  curl -sk -o /dev/null "https://127.0.0.1:$port/healthz" || die "$ref did not start; see $dir/$ref/"
  refs+=(--reference "$ref=https://127.0.0.1:$port:$!")
done

"${client_cpus[@]}" python3 "$root/scripts/real-overhead.py" "${refs[@]}" \
  --direct "$server" --proxy "https://127.0.0.1:$proxy_port" \
  --apiserver-pid "$(cat "$dir/pid")" --proxy-pid "$proxy_pid" \
  --token alice-token --oha "$oha" --out "$dir/results.json"
