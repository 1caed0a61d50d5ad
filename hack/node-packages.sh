#!/usr/bin/env bash
# Install (once) the Debian packages a real draflow node needs beside the Go binaries of hack/binaries.sh:
#   runc       the OCI runtime containerd's runc shim calls (cgroup v1 and v2)
#   mmdebstrap builds the Debian root filesystems of the images (hack/images.sh)
#   umoci      turns a root filesystem into an OCI image layout
#   iptables   the CNI bridge plugin's masquerading rules
# Idempotent: does nothing when all are installed. Needs root (apt-get).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/debian-packages.sh" --tag node-packages runc mmdebstrap umoci iptables
