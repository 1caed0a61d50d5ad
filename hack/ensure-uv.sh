#!/usr/bin/env bash
# Install uv (pinned) into the draflow cache if it is not there yet, and print its path.
# uv comes from PyPI (the uv wheel ships the binary), installed with the machine's python3 -m pip.
set -euo pipefail
UV_VERSION=0.13.9
CACHE=${DRAFLOW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/draflow}
dir="$CACHE/uv-$UV_VERSION"
if [ ! -x "$dir/bin/uv" ]; then
  echo "[uv] installing uv $UV_VERSION into $dir" >&2
  python3 -m pip install --quiet --disable-pip-version-check --target "$dir/lib" "uv==$UV_VERSION" >&2
  mkdir -p "$dir/bin"
  ln -sf "$(find "$dir/lib" -path '*/bin/uv' -type f | head -1)" "$dir/bin/uv"
fi
mkdir -p "$CACHE/uv"
ln -sfn "$dir/bin/uv" "$CACHE/uv/uv"
echo "$dir/bin/uv"
