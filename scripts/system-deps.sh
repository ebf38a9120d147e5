#!/usr/bin/env bash
# Install the Debian packages that vigil's build host and test suite use.
# Idempotent: installs only what is missing; runs `apt-get update` once, and only when needed.
set -euo pipefail

# command -> package
declare -A want=(
  [minisign]=minisign
  [zstd]=zstd
  [dpkg-deb]=dpkg
  # the lab (vigil lab up): a Debian root fs, systemd-nspawn containers on a bridge, ssh into them
  [debootstrap]=debootstrap
  [systemd-nspawn]=systemd-container
  [ip]=iproute2
  [ssh]=openssh-client
  [ssh-keygen]=openssh-client
  [chattr]=e2fsprogs
  [mount]=mount
  # the Slurm job map scripts (tests/unit/jobmap): POSIX sh lint, exposition format check
  [shellcheck]=shellcheck
  [promtool]=prometheus
  # the report PDF's tests read it with stock tools: structure, text, pages
  [qpdf]=qpdf
  [pdftotext]=poppler-utils
  [pdfinfo]=poppler-utils
  # the firewall role's ruleset is checked and loaded in a throwaway network namespace
  [nft]=nftables
  [unshare]=util-linux
)
# file -> package (things that are not commands)
declare -A want_files=(
  [/usr/share/keyrings/debian-archive-keyring.gpg]=debian-archive-keyring
)

missing=()
add() { [[ " ${missing[*]-} " == *" $1 "* ]] || missing+=("$1"); }
for cmd in "${!want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || add "${want[$cmd]}"
done
for f in "${!want_files[@]}"; do
  [ -e "$f" ] || add "${want_files[$f]}"
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
