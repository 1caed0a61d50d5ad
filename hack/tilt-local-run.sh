#!/usr/bin/env bash
# Run one draflow service as a local process against a running `draflow-testenv up` (the Tiltfile's local
# mode; usable by hand too). Reads the environment's <state>/env.sh (KUBECONFIG, NATS_URL,
# OTEL_EXPORTER_OTLP_ENDPOINT) and maps NATS_URL to the service's own DRAFLOW_<SERVICE>_NATS_URL.
#
# The allocator's web view links traces to the environment's Jaeger (JAEGER_URL).
#
# Usage: hack/tilt-local-run.sh STATE_DIR SERVICE [ARGS...]
#   e.g. hack/tilt-local-run.sh .draflow/tilt claim-controller --http-port 18080
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 STATE_DIR SERVICE [ARGS...]" >&2
  exit 2
fi
state=$1 service=$2
shift 2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ ! -f "$state/env.sh" ]; then
  echo "$state/env.sh not found: is \`draflow-testenv up --state-dir $state\` running?" >&2
  exit 1
fi
# shellcheck disable=SC1091
source "$state/env.sh"
export KUBECONFIG OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_INSECURE
prefix=DRAFLOW_$(printf '%s' "$service" | tr 'a-z-' 'A-Z_')_
export "${prefix}NATS_URL=$NATS_URL"
export "${prefix}LOG_FORMAT=${DRAFLOW_LOG_FORMAT:-console}"
if [ "$service" = structured-allocator ]; then
  export DRAFLOW_STRUCTURED_ALLOCATOR_UI_JAEGER_URL=${JAEGER_URL:-}
fi
exec "$repo/.venv/bin/$service" "$@"
