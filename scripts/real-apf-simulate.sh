#!/usr/bin/env bash
# `simulate` checked against a real kube-apiserver: the apiserver alone enforces the bench
# configuration of scripts/real-apf.sh (scripts/real-apf-bench.yaml) at MRI/MMRI under its overload
# pattern (alice with HEAVY connections, bob with LIGHT, both LISTing 500 ConfigMaps closed-loop for
# SECS seconds; scripts/closed-loop.py records every request), then `simulate` replays the audit log
# that apiserver wrote under the same configuration (the embedded bootstrap objects, which the
# apiserver also had, plus the bench ones) and the same limits. Per flow: dispatched and rejected as
# the clients saw them against simulate's, and the waits. Loopback only, bounded (one apiserver
# start, SECS of load, three replays).
#
#   cargo build && scripts/real-apf-simulate.sh [DIR]
#
# Knobs: SECS (15), HEAVY (48), LIGHT (4), MRI (100), MMRI (50); PROXY_BIN (target/debug/kube-apf-proxy).
#
# An audit event's `stageTimestamp - requestReceivedTimestamp` includes the queue wait the
# recording apiserver added. The apiserver writes that wait into the audit event (annotation
# apiserver.latency.k8s.io/apf-queue-wait, only for requests that took over 500 ms) and simulate
# takes it out of the request's execution by default. The log is replayed three times: as written
# (--keep-recorded-waits); with the recorded waits taken out (simulate's default); and with the
# bench executions then scaled to add up to what the apiserver measured itself (its
# execution-seconds metric): a calibration that the audit log alone cannot give, which shows how
# much of the error is the input rather than the queueing.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
base="${1:-$root/target/real-apf-simulate/run-$$}"
proxy_bin="${PROXY_BIN:-$root/target/debug/kube-apf-proxy}"
secs="${SECS:-15}" heavy="${HEAVY:-48}" light="${LIGHT:-4}" mri="${MRI:-100}" mmri="${MMRI:-50}"

die() {
  echo "real-apf-simulate.sh: $*" >&2
  exit 1
}

[ -x "$proxy_bin" ] || die "$proxy_bin missing: run cargo build first"
mkdir -p "$base"
base="$(cd "$base" && pwd)"
dir="$base/apiserver-alone"

running=""
cleanup() {
  [ -z "$running" ] || "$root/scripts/kube-apiserver.sh" stop "$running" || true
}
trap cleanup EXIT

k() { kubectl --kubeconfig="$dir/admin.kubeconfig" --cache-dir="$dir/kube-cache" "$@"; }

# 1. The apiserver alone enforcing the bench configuration at MRI/MMRI.
server="$(KUBE_APISERVER_OWNER_PID=$$ "$root/scripts/kube-apiserver.sh" start "$dir" -- \
  --max-requests-inflight="$mri" --max-mutating-requests-inflight="$mmri")"
running=$dir
k create namespace bench-list >/dev/null
k create clusterrole bench-configmaps --verb=get,list,watch,create --resource=configmaps >/dev/null
k create clusterrolebinding bench-configmaps --clusterrole=bench-configmaps --user=alice --user=bob >/dev/null
python3 -c '
import json
items = [{"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": f"cm-{i:03d}", "namespace": "bench-list"},
          "data": {"key": f"value-{i}", "other": "x" * 64}} for i in range(500)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))' | k create -f - >/dev/null
k apply -f "$root/scripts/real-apf-bench.yaml" >/dev/null
for _ in $(seq 1 100); do
  if k get flowschema bench -o jsonpath='{.status.conditions[?(@.type=="Dangling")].status}' 2>/dev/null | grep -q False; then
    break
  fi
  sleep 0.1
done
# The apiserver's object counts (a list's work estimate) refresh each minute: wait (at most 150 s)
# until it counts the 500 ConfigMaps, so that its list cost does not change during the load.
echo "real-apf-simulate.sh: apiserver alone at $server (limits $mri/$mmri); waiting for its object counts" >&2
for _ in $(seq 1 30); do
  k get --raw /metrics >"$dir/before.metrics"
  grep -qE '^apiserver_resource_objects\{group="",resource="configmaps"\} ([5-9][0-9]{2}|[0-9]{4,})$' \
    "$dir/before.metrics" && break
  sleep 5
done
# What the apiserver's list estimate reads (its ConfigMap count and size), for simulate's.
python3 "$root/scripts/real-apf-simulate.py" object-counts "$dir/before.metrics" >"$base/object-counts.yaml"
python3 "$root/scripts/closed-loop.py" "$server" /api/v1/namespaces/bench-list/configmaps "$secs" \
  "$dir/requests.txt" "alice:alice-token:$heavy" "bob:bob-token:$light"
k get --raw /metrics >"$dir/apiserver.metrics"
grep -E '^apiserver_flowcontrol_(dispatched|rejected)_requests_total\{[^}]*priority_level="bench"' \
  "$dir/apiserver.metrics" >"$dir/bench.metrics" || true
"$root/scripts/kube-apiserver.sh" stop "$dir"
running=""

# 2. The same configuration and limits for simulate: the bootstrap objects plus the bench ones.
mkdir -p "$base/config"
cp "$root/src/config/bootstrap.yaml" "$base/config/bootstrap.yaml"
cp "$root/scripts/real-apf-bench.yaml" "$base/config/bench.yaml"

# The log with the bench executions scaled to what the apiserver measured (see
# real-apf-simulate.py); the two other replays read the apiserver's log itself.
python3 "$root/scripts/real-apf-simulate.py" traces "$dir/audit.log" "$dir/apiserver.metrics" "$base"
for trace in raw nowait calibrated; do
  log="$dir/audit.log" keep=()
  case "$trace" in
    raw) keep=(--keep-recorded-waits) ;;
    calibrated) log="$base/audit-calibrated.log" ;;
  esac
  "$proxy_bin" simulate --trace "$log" --config-dir "$base/config" \
    --object-counts "$base/object-counts.yaml" \
    --max-requests-inflight "$mri" --max-mutating-requests-inflight "$mmri" \
    "${keep[@]}" --output json >"$base/simulate-$trace.json"
done

# 3. Per flow: the clients against simulate's three replays, and the waits.
python3 "$root/scripts/real-apf-simulate.py" compare "$base" "$secs" "$heavy" "$light" "$mri" "$mmri"
