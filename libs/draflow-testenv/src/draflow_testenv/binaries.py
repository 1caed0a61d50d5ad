"""Find (and, when missing, build) the pinned infrastructure binaries.

The versions live in ``hack/versions.env``; ``hack/binaries.sh`` builds each binary from Go modules into
``${DRAFLOW_CACHE:-${XDG_CACHE_HOME:-~/.cache}/draflow}/bin/<name>-<version>/<name>``. This module computes
the same path, so Python and the shell script agree without running the script for every look-up.
``DRAFLOW_BIN_<NAME>`` (``NAME`` upper-cased, ``-`` as ``_``, e.g. ``DRAFLOW_BIN_KUBE_APISERVER``) overrides
the path of one binary.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

VERSION_KEYS = {
    "kube-apiserver": "KUBERNETES_VERSION",
    "etcd": "ETCD_VERSION",
    "nats-server": "NATS_SERVER_VERSION",
    "jaeger": "JAEGER_VERSION",
    "kustomize": "KUSTOMIZE_VERSION",
    "promtool": "PROMETHEUS_VERSION",
    "tilt": "TILT_VERSION",
    "kubelet": "KUBERNETES_VERSION",
    "kube-scheduler": "KUBERNETES_VERSION",
    "kube-controller-manager": "KUBERNETES_VERSION",
    "kubectl": "KUBERNETES_VERSION",
    "containerd": "CONTAINERD_VERSION",
    "cni-plugins": "CNI_PLUGINS_VERSION",
}
# Built from this repository's hack/<name>: the version is a hash of these sources (as hack/binaries.sh does).
SOURCE_VERSIONED = {"pause": ("go.mod", "main.go")}
# Go modules of this repository's hack/<name> built against Kubernetes: the version is the Kubernetes version
# plus a hash of go.mod, go.sum and every .go file (hack/binaries.sh's go_module_hash).
GO_MODULE_VERSIONED = {"go-dra-driver", "go-api-check", "go-alloc-diff"}
# Directories of several binaries: the path names the one moved in last (containerd's holds
# containerd-shim-runc-v2 and ctr too; cni-plugins' holds bridge, host-local and loopback).
MARKER = {"cni-plugins": "loopback"}


class BinaryNotFound(RuntimeError):
    """A binary is not in the cache and could not be built."""

    def __init__(self, name: str, path: Path, detail: str = "") -> None:
        super().__init__(f"{name} not found at {path}{': ' + detail if detail else ''}")
        self.name = name
        self.path = path


def repo_root() -> Path:
    """The draflow checkout: ``$DRAFLOW_REPO`` or the nearest parent holding ``hack/versions.env``."""
    env = os.environ.get("DRAFLOW_REPO")
    if env:
        return Path(env).resolve()
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for d in (start, *start.parents):
            if (d / "hack" / "versions.env").is_file():
                return d
    raise RuntimeError("cannot find the draflow repository (hack/versions.env); set DRAFLOW_REPO")


def read_versions(root: Path | None = None) -> dict[str, str]:
    """``KEY=value`` pairs of ``hack/versions.env`` (comments and blank lines skipped)."""
    path = (root or repo_root()) / "hack" / "versions.env"
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip().strip("\"'")
    return out


def cache_dir() -> Path:
    if os.environ.get("DRAFLOW_CACHE"):
        return Path(os.environ["DRAFLOW_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "draflow"


def _override(name: str) -> str | None:
    return os.environ.get("DRAFLOW_BIN_" + name.upper().replace("-", "_"))


def go_module_hash(src: Path) -> str:
    """What ``go_module_hash`` of hack/binaries.sh prints for the module directory ``src``."""
    files = sorted("./" + str(p.relative_to(src)) for p in src.rglob("*")
                   if p.is_file() and (p.suffix == ".go" or p.name in ("go.mod", "go.sum")))
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.encode() + b"\n" + (src / f).read_bytes())
    return digest.hexdigest()[:12]


def version_of(name: str, root: Path | None = None) -> str:
    if name in GO_MODULE_VERSIONED:
        root = root or repo_root()
        return read_versions(root)["KUBERNETES_VERSION"] + "-" + go_module_hash(root / "hack" / name)
    if name in SOURCE_VERSIONED:
        src = (root or repo_root()) / "hack" / name
        data = b"".join((src / f).read_bytes() for f in SOURCE_VERSIONED[name])
        return hashlib.sha256(data).hexdigest()[:12]
    return read_versions(root)[VERSION_KEYS[name]]


def binary_path(name: str, root: Path | None = None) -> Path:
    """Where ``name`` is (or will be) cached; no build."""
    override = _override(name)
    if override:
        return Path(override)
    return cache_dir() / "bin" / f"{name}-{version_of(name, root)}" / MARKER.get(name, name)


async def ensure_binary(name: str, root: Path | None = None) -> Path:
    """The path of ``name``, running ``hack/binaries.sh ensure NAME`` first when it is missing.

    Idempotent: a cached binary is returned at once. A build can take many minutes on a cold Go cache.
    """
    path = binary_path(name, root)
    if os.access(path, os.X_OK):
        return path
    if _override(name):
        raise BinaryNotFound(name, path, "set by DRAFLOW_BIN_" + name.upper().replace("-", "_"))
    root = root or repo_root()
    proc = await asyncio.create_subprocess_exec(
        str(root / "hack" / "binaries.sh"), "ensure", name,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0 or not os.access(path, os.X_OK):
        tail = "\n".join(out.decode(errors="replace").splitlines()[-20:])
        raise BinaryNotFound(name, path, f"hack/binaries.sh ensure {name} failed:\n{tail}")
    return path
