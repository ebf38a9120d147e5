#!/usr/bin/env bash
# Install the Debian packages that vigil's build host and test suite use.
# Idempotent: installs only what is missing; runs `apt-get update` once, and only when needed.
set -euo pipefail

# command -> package
declare -A want=(
  [minisign]=minisign
  [zstd]=zstd
  [dpkg-deb]=dpkg
)

missing=()
for cmd in "${!want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${want[$cmd]}")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "FAIL: system-deps: missing ${missing[*]} and not root; install them with apt-get" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "OK: system-deps: installed ${missing[*]}"
