#!/usr/bin/env bash
# A real kube-apiserver (with an embedded etcd) for tests and for trying the proxy without a cluster.
#
#   scripts/kube-apiserver.sh build
#       builds the harness (tests/kube-apiserver/, Go modules only) into target/kube-apiserver/,
#       again only when its go.mod, go.sum or main.go (or the Go version) changed.
#   scripts/kube-apiserver.sh start DIR [-- EXTRA_FLAGS...]
#       builds when needed, starts kube-apiserver on a free port of 127.0.0.1, waits until /readyz
#       answers 200 (at most 120 s) and prints the server URL. DIR receives: server, ca.crt,
#       admin.kubeconfig (system:masters client certificate), client-ca.crt, client-ca.key,
#       front-proxy-ca.crt, front-proxy-client.crt, front-proxy-client.key (CN front-proxy-client),
#       tokens.csv (admin-token: system:masters; alice-token: alice in dev; bob-token: bob),
#       audit.log (level Metadata for every request), apiserver.log and pid. EXTRA_FLAGS go last.
#   scripts/kube-apiserver.sh stop DIR
#       stops it by its pid and waits until it is gone.
#
# KUBE_APISERVER_OWNER_PID (optional): the apiserver exits by itself once that process is gone.
# KUBE_APISERVER_BIN_DIR (optional): where the binary is cached (default target/kube-apiserver).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tests/kube-apiserver"
bin_dir="${KUBE_APISERVER_BIN_DIR:-$root/target/kube-apiserver}"
bin="$bin_dir/kube-apiserver-harness"
# The Kubernetes release the harness pins (go.mod); reported by the apiserver's /version.
k8s_version="v1.37.2"

die() {
  echo "kube-apiserver.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: scripts/kube-apiserver.sh build | start DIR [-- EXTRA_FLAGS...] | stop DIR" >&2
  exit 2
}

build() {
  command -v go >/dev/null 2>&1 || die "Go is not installed (needed to build kube-apiserver from modules)"
  local stamp
  stamp="$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" <(go version) "$0" | sha256sum | cut -d' ' -f1)"
  if [ -x "$bin" ] && [ "$(cat "$bin_dir/stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  mkdir -p "$bin_dir"
  echo "kube-apiserver.sh: building kube-apiserver $k8s_version with embedded etcd (first build: several minutes)" >&2
  local started=$SECONDS
  (
    cd "$src"
    go build -mod=readonly -trimpath -buildvcs=false -o "$bin.new" \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" \
      .
  ) || die "go build of tests/kube-apiserver failed"
  mv "$bin.new" "$bin"
  echo "$stamp" >"$bin_dir/stamp"
  echo "kube-apiserver.sh: built in $((SECONDS - started)) s: $bin" >&2
}

running_pid() {
  local dir=$1 pid
  [ -f "$dir/pid" ] || return 1
  pid="$(cat "$dir/pid")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

write_kubeconfig() {
  local dir=$1 server=$2
  local ca cert key
  ca="$(base64 -w0 <"$dir/ca.crt")"
  cert="$(base64 -w0 <"$dir/admin.crt")"
  key="$(base64 -w0 <"$dir/admin.key")"
  umask 077
  cat >"$dir/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kube-apiserver
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: admin
  user:
    client-certificate-data: $cert
    client-key-data: $key
contexts:
- name: admin
  context:
    cluster: kube-apiserver
    user: admin
current-context: admin
EOF
}

start() {
  [ $# -ge 1 ] || usage
  local dir=$1
  shift
  if [ $# -gt 0 ]; then
    [ "$1" = "--" ] || usage
    shift
  fi
  build
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if pid="$(running_pid "$dir")"; then
    die "$dir: already running as pid $pid (scripts/kube-apiserver.sh stop $dir)"
  fi

  "$bin" pki "$dir"
  umask 077
  cat >"$dir/tokens.csv" <<'EOF'
admin-token,admin,admin-uid,"system:masters"
alice-token,alice,alice-uid,"dev"
bob-token,bob,bob-uid
EOF
  cat >"$dir/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
EOF
  local port server
  port="$("$bin" free-port)"
  server="https://127.0.0.1:$port"
  echo "$server" >"$dir/server"
  write_kubeconfig "$dir" "$server"
  : >"$dir/audit.log"

  local flags=(
    --bind-address=127.0.0.1
    --advertise-address=127.0.0.1
    # The loopback address cannot back the kubernetes Service endpoints.
    --endpoint-reconciler-type=none
    --secure-port="$port"
    --tls-cert-file="$dir/serving.crt"
    --tls-private-key-file="$dir/serving.key"
    --client-ca-file="$dir/client-ca.crt"
    --token-auth-file="$dir/tokens.csv"
    --authorization-mode=RBAC
    --requestheader-client-ca-file="$dir/front-proxy-ca.crt"
    --requestheader-allowed-names=front-proxy-client
    --requestheader-username-headers=X-Remote-User
    --requestheader-group-headers=X-Remote-Group
    --requestheader-extra-headers-prefix=X-Remote-Extra-
    --proxy-client-cert-file="$dir/front-proxy-client.crt"
    --proxy-client-key-file="$dir/front-proxy-client.key"
    --service-account-key-file="$dir/sa.pub"
    --service-account-signing-key-file="$dir/sa.key"
    --service-account-issuer=https://kubernetes.default.svc
    --service-cluster-ip-range=10.0.0.0/24
    --audit-policy-file="$dir/audit-policy.yaml"
    --audit-log-path="$dir/audit.log"
    --audit-log-mode=blocking
    --audit-log-maxsize=0
    --enable-priority-and-fairness=true
    --cert-dir="$dir/certs"
    --v=1
    "$@"
  )
  # setsid: the apiserver outlives this script and is not in the caller's process group.
  setsid "$bin" serve --etcd-dir "$dir/etcd" -- "${flags[@]}" >"$dir/apiserver.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  if ! "$bin" wait-ready "$server" "$dir/ca.crt" 120 "$pid"; then
    kill "$pid" 2>/dev/null || true
    echo "kube-apiserver.sh: last lines of $dir/apiserver.log:" >&2
    tail -n 20 "$dir/apiserver.log" >&2 || true
    exit 1
  fi
  echo "$server"
}

stop() {
  [ $# -eq 1 ] || usage
  local dir=$1 pid
  if ! pid="$(running_pid "$dir")"; then
    return 0
  fi
  kill "$pid"
  local n
  for n in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "kube-apiserver.sh: pid $pid still running after 30 s; sending SIGKILL" >&2
    kill -9 "$pid" 2>/dev/null || true
    for n in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
}

[ $# -ge 1 ] || usage
command="$1"
shift
case "$command" in
  build) [ $# -eq 0 ] || usage; build ;;
  start) start "$@" ;;
  stop) stop "$@" ;;
  *) usage ;;
esac
