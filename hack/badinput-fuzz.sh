#!/usr/bin/env bash
# Run the generated hostile-input check (tests/integration/badinput/test_hostile.py) for many seeds against
# one running stack (started by the test session: real kube-apiserver, etcd, NATS, the five services).
# Each seed is one pytest case; a failing one prints its seed and what broke, and
# `hack/badinput-fuzz.sh SEED` replays it. Per seed: what the API server refused, how each pod ended.
#
# Usage: hack/badinput-fuzz.sh [SEEDS] [PYTEST ARGS...]
#   SEEDS: 7, 1,5,9 or 100-199 (inclusive); default 1-100
#   e.g. hack/badinput-fuzz.sh 1000-1499 -x
set -euo pipefail

seeds=${1:-1-100}
[ $# -gt 0 ] && shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
DRAFLOW_FUZZ_SEEDS=$seeds exec .venv/bin/pytest tests/integration/badinput/test_hostile.py \
  -k test_hostile_batch -q -s -p no:cacheprovider "$@"
