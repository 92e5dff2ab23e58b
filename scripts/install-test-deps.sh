#!/usr/bin/env bash
# Installs the external programs the end-to-end tests use, from Debian's packages: prometheus (for
# tests/prometheus_scrape.rs), nginx-light (the comparison proxy of the load harness) and
# chromium-headless-shell (renders `simulate --report` in tests/cli_simulate.rs).
# Idempotent: installs only what is missing, quietly when everything is there. Needs root for
# apt-get; as another user it prints what to install and exits 0 (those tests then skip).
# Debian's prometheus package registers a service; nothing is started here (and in containers
# policy-rc.d usually forbids it anyway).
set -euo pipefail

need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
{ command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } || need+=(nginx-light)
command -v chromium-headless-shell >/dev/null 2>&1 || need+=(chromium-headless-shell)

if [ "${#need[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-test-deps: please install ${need[*]} (apt-get install --no-install-recommends); the tests that need them are skipped otherwise" >&2
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: no apt-get here; install ${need[*]} by hand" >&2
  exit 0
fi

echo "install-test-deps: installing ${need[*]}" >&2
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian's postinst may start the service of a package just installed; the tests run their own.
for pkg in "${need[@]}"; do
  unit="${pkg%-light}"
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$unit" 2>/dev/null; then
    systemctl stop "$unit" || true
  fi
done
