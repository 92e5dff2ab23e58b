#!/usr/bin/env bash
# Helm for the chart in deploy/helm/kube-apf-proxy/, built from Go modules (nothing prebuilt is
# downloaded).
#
#   scripts/helm.sh build
#       builds Helm (tests/helm/go.mod pins the release and, through go.sum, every module it is
#       built from) into target/helm/, again only when go.mod, go.sum or the Go version changed.
#   scripts/helm.sh ARGS...
#       builds when needed, then runs `helm ARGS...` (e.g. `scripts/helm.sh lint deploy/helm/kube-apf-proxy`).
#
# HELM_BIN_DIR (optional): where the binary is cached (default target/helm).
# Helm's own state (repositories, cache, plugins) goes under the cache directory too, unless the
# caller sets HELM_CACHE_HOME / HELM_CONFIG_HOME / HELM_DATA_HOME.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/tests/helm"
bin_dir="${HELM_BIN_DIR:-$root/target/helm}"
bin="$bin_dir/helm"
# The release tests/helm/go.mod requires; reported by `helm version`.
helm_version="v3.22.0"

die() {
  echo "helm.sh: $*" >&2
  exit 1
}

build() {
  command -v go >/dev/null 2>&1 || die "Go is not installed (needed to build Helm from modules)"
  local stamp
  stamp="$(cat "$src/go.mod" "$src/go.sum" <(go version) "$0" | sha256sum | cut -d' ' -f1)"
  if [ -x "$bin" ] && [ "$(cat "$bin_dir/stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  grep -q "^[[:space:]]*helm.sh/helm/v3 $helm_version\$\|helm.sh/helm/v3 $helm_version " "$src/go.mod" \
    || die "tests/helm/go.mod does not require helm.sh/helm/v3 $helm_version"
  mkdir -p "$bin_dir"
  echo "helm.sh: building Helm $helm_version (first build: a few minutes)" >&2
  local started=$SECONDS
  (
    cd "$src"
    go build -mod=readonly -trimpath -buildvcs=false -o "$bin.new" \
      -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
      helm.sh/helm/v3/cmd/helm
  ) || die "go build of Helm (tests/helm) failed"
  mv "$bin.new" "$bin"
  echo "$stamp" >"$bin_dir/stamp"
  echo "helm.sh: built in $((SECONDS - started)) s: $bin" >&2
}

[ $# -ge 1 ] || { echo "usage: scripts/helm.sh build | HELM_ARGS..." >&2; exit 2; }
build
if [ "$1" = "build" ] && [ $# -eq 1 ]; then
  exit 0
fi
export HELM_CACHE_HOME="${HELM_CACHE_HOME:-$bin_dir/home/cache}"
export HELM_CONFIG_HOME="${HELM_CONFIG_HOME:-$bin_dir/home/config}"
export HELM_DATA_HOME="${HELM_DATA_HOME:-$bin_dir/home/data}"
exec "$bin" "$@"
