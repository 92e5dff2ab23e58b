#!/usr/bin/env bash
# The queue-set differential: our queue set against k8s.io/apiserver's, dispatch for dispatch.
#
#   scripts/queueset-differential.sh --seeds A..B [--as-shipped] [--keep-differing DIR]
#
# For each seed (A..B, both included) it generates a random scenario, runs it through the
# apiserver's fairqueuing/queueset (the Go driver in tests/queueset-oracle/, pinned to the
# Kubernetes release of tests/kube-apiserver/) and through ours, and prints `seed N: identical` or
# the first difference (`seed N: request I FIELD: ours X theirs Y`). The last line is
# `identical N/M`; the exit status is non-zero when anything differs or nothing was compared.
#
# By default our queue set behaves as the apiserver's where it chooses to differ
# (docs/apf-differences.md); --as-shipped compares it as we ship it.
#
# The oracle is built once into target/queueset-oracle/ (again only when its sources or the Go
# version change): its module's dependencies are vendored there from the Go module cache, and the
# driver file is added to the queueset package with -overlay. Nothing of Kubernetes is copied into
# the repository. Without network access the module cache must hold them (scripts/kube-apiserver.sh
# build fills it). CARGO_PROFILE (default: dev) picks the build of kube-apf-proxy;
# KUBE_APF_PROXY_BIN names a binary already built instead (tests/queueset_differential.rs).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tests/queueset-oracle"
build_dir="${QUEUESET_ORACLE_DIR:-$root/target/queueset-oracle}"
oracle="$build_dir/queueset-oracle"

die() {
  echo "queueset-differential.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: scripts/queueset-differential.sh --seeds A..B [--as-shipped] [--keep-differing DIR]" >&2
  exit 2
}

build_oracle() {
  command -v go >/dev/null 2>&1 || die "Go is not installed (needed to build the oracle from k8s.io/apiserver)"
  local stamp
  stamp="$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" "$src/overlay/oracle_driver.go" <(go version) "$0" | sha256sum | cut -d' ' -f1)"
  if [ -x "$oracle" ] && [ "$(cat "$build_dir/stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  echo "queueset-differential.sh: building the oracle (k8s.io/apiserver's queue set)" >&2
  local mod="$build_dir/module"
  rm -rf "$mod"
  mkdir -p "$mod"
  cp "$src/go.mod" "$src/go.sum" "$src/main.go" "$mod/"
  (
    cd "$mod"
    # Vendored (not committed) so the driver can be overlaid into the package: go refuses to
    # overlay files beneath the module cache.
    GOFLAGS=-mod=mod go mod vendor
    local pkg="$mod/vendor/k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset"
    [ -d "$pkg" ] || die "the vendored k8s.io/apiserver has no fairqueuing/queueset"
    printf '{"Replace":{"%s/zz_oracle_driver.go":"%s"}}\n' "$pkg" "$src/overlay/oracle_driver.go" >"$mod/overlay.json"
    go build -mod=vendor -tags queueset_oracle -overlay "$mod/overlay.json" -trimpath -buildvcs=false \
      -o "$oracle.new" .
  ) || die "building the oracle failed"
  mv "$oracle.new" "$oracle"
  echo "$stamp" >"$build_dir/stamp"
}

[ $# -ge 1 ] || usage
args=()
have_seeds=false
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds)
      [ $# -ge 2 ] || usage
      args+=(--seeds "$2")
      have_seeds=true
      shift 2
      ;;
    --seeds=*)
      args+=("$1")
      have_seeds=true
      shift
      ;;
    --as-shipped)
      args+=(--as-shipped)
      shift
      ;;
    --keep-differing)
      [ $# -ge 2 ] || usage
      args+=(--keep-differing "$2")
      shift 2
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) usage ;;
  esac
done
$have_seeds || usage

build_oracle
if [ -n "${KUBE_APF_PROXY_BIN:-}" ]; then
  bin="$KUBE_APF_PROXY_BIN"
else
  profile="${CARGO_PROFILE:-dev}"
  cargo build --quiet --locked --profile "$profile" --bin kube-apf-proxy
  case "$profile" in
    dev | test) bin="$root/target/debug/kube-apf-proxy" ;;
    *) bin="$root/target/$profile/kube-apf-proxy" ;;
  esac
fi
exec "$bin" queueset-run --oracle "$oracle" "${args[@]}"
