#!/usr/bin/env bash
# Install (once) Debian packages by name with apt-get: hack/debian-packages.sh [--tag TAG] PACKAGE...
# Idempotent and cheap when all are installed (dpkg-query only; no apt-get update). Needs root.
# Used by hack/node-packages.sh (a real node's packages) and hack/browser-packages.sh (the UI test's browser).
set -euo pipefail
tag=debian-packages
if [ "${1:-}" = --tag ]; then tag=$2; shift 2; fi
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
printf '[%s] installing %s\n' "$tag" "${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  printf '[%s] apt-get FAILED; last lines:\n' "$tag" >&2
  tail -20 "$log" >&2
  exit 1
fi
rm -f "$log"
printf '[%s] installed %s\n' "$tag" "${missing[*]}" >&2
