#!/usr/bin/env bash
# Install (once) the Debian packages a real draflow node needs beside the Go binaries of hack/binaries.sh:
#   runc       the OCI runtime containerd's runc shim calls (cgroup v1 and v2)
#   mmdebstrap builds the Debian root filesystems of the images (hack/images.sh)
#   umoci      turns a root filesystem into an OCI image layout
#   iptables   the CNI bridge plugin's masquerading rules
# Idempotent: does nothing when all are installed. Needs root (apt-get).
set -euo pipefail
pkgs=(runc mmdebstrap umoci iptables)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
printf '[node-packages] installing %s\n' "${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  printf '[node-packages] apt-get FAILED; last lines:\n' >&2
  tail -20 "$log" >&2
  exit 1
fi
rm -f "$log"
printf '[node-packages] installed %s\n' "${missing[*]}" >&2
