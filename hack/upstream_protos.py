#!/usr/bin/env python3
"""Compare draflow's copies of the kubelet protos with the pinned upstream ``.proto`` files.

    python hack/upstream_protos.py       # exit 1 listing every difference (part of `make verify-protos`)

The upstream files come from the Go module ``k8s.io/kubelet`` at ``KUBERNETES_STAGING_VERSION``
(``hack/versions.env``), fetched into the Go module cache by ``go mod download`` (once; later runs read the
cache), the Go toolchain being the one ``hack/binaries.sh go`` names. Both sides are compiled by
``grpc_tools.protoc`` into descriptors and compared on what is on the wire and in the generated API:
package, messages (field names, numbers, types, labels, ``optional`` presence, oneofs, nested and map
types), enums (value names and numbers) and services (methods, request and response types, streaming).
Comments and options (``go_package``) are not compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
UPSTREAM_MODULE = "k8s.io/kubelet"

# Our file (under protos/) -> upstream file (in the k8s.io/kubelet module).
KUBELET_PROTOS = {
    "draflow_protos/pluginregistration/v1/api.proto": "pkg/apis/pluginregistration/v1/api.proto",
    "draflow_protos/dra/v1/api.proto": "pkg/apis/dra/v1/api.proto",
    "draflow_protos/dra/v1beta1/api.proto": "pkg/apis/dra/v1beta1/api.proto",
    "draflow_protos/drahealth/v1alpha1/api.proto": "pkg/apis/dra-health/v1alpha1/api.proto",
    "draflow_protos/drahealth/v1/api.proto": "pkg/apis/dra-health/v1/api.proto",
}


class UpstreamError(RuntimeError):
    """The upstream module could not be fetched or a file could not be compiled."""


def staging_version() -> str:
    for line in (ROOT / "hack" / "versions.env").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "KUBERNETES_STAGING_VERSION":
            return value.strip()
    raise UpstreamError("KUBERNETES_STAGING_VERSION is not set in hack/versions.env")


def module_dir(version: str) -> Path:
    """The k8s.io/kubelet module at ``version`` in the Go module cache (downloaded when missing)."""
    go = subprocess.run(
        [str(ROOT / "hack" / "binaries.sh"), "go"], capture_output=True, text=True, check=False
    )
    if go.returncode != 0 or not go.stdout.strip():
        raise UpstreamError(f"no Go toolchain (hack/binaries.sh go): {go.stderr.strip()}")
    with tempfile.TemporaryDirectory(prefix="draflow-upstream-") as tmp:  # outside any Go module
        out = subprocess.run(
            [go.stdout.strip(), "mod", "download", "-json", f"{UPSTREAM_MODULE}@{version}"],
            cwd=tmp, capture_output=True, text=True, check=False, env={**os.environ, "GOFLAGS": "-mod=mod"},
        )
    try:
        info = json.loads(out.stdout)
    except json.JSONDecodeError:
        info = {}
    if out.returncode != 0 or not info.get("Dir"):
        detail = info.get("Error") or out.stderr.strip() or out.stdout.strip()
        raise UpstreamError(f"go mod download {UPSTREAM_MODULE}@{version} failed: {detail}")
    return Path(info["Dir"])


def compile_file(include: Path, name: str) -> descriptor_pb2.FileDescriptorProto:
    """``include/name`` compiled by protoc into its FileDescriptorProto."""
    with tempfile.TemporaryDirectory(prefix="draflow-protoc-") as tmp:
        out = Path(tmp) / "set.pb"
        result = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{include}", f"--descriptor_set_out={out}", name],
            capture_output=True, text=True, check=False,
        )
        if result.returncode != 0:
            raise UpstreamError(f"protoc {include / name}: {result.stderr.strip()}")
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return fds.file[0]


def _field(f: descriptor_pb2.FieldDescriptorProto, oneofs: list[str]) -> dict[str, Any]:
    in_oneof = f.HasField("oneof_index") and not f.proto3_optional
    return {
        "number": f.number,
        "type": descriptor_pb2.FieldDescriptorProto.Type.Name(f.type),
        "type_name": f.type_name,
        "label": descriptor_pb2.FieldDescriptorProto.Label.Name(f.label),
        "optional": f.proto3_optional,
        "oneof": oneofs[f.oneof_index] if in_oneof else "",
    }


def _message(m: descriptor_pb2.DescriptorProto) -> dict[str, Any]:
    oneofs = [o.name for o in m.oneof_decl]
    return {
        "fields": {f.name: _field(f, oneofs) for f in m.field},
        "nested": {n.name: _message(n) for n in m.nested_type},
        "enums": {e.name: _enum(e) for e in m.enum_type},
        "map_entry": m.options.map_entry,
    }


def _enum(e: descriptor_pb2.EnumDescriptorProto) -> dict[str, int]:
    return {v.name: v.number for v in e.value}


def shape(fd: descriptor_pb2.FileDescriptorProto) -> dict[str, Any]:
    """What is compared of a file: everything on the wire and in the generated API, nothing else."""
    return {
        "package": fd.package,
        "messages": {m.name: _message(m) for m in fd.message_type},
        "enums": {e.name: _enum(e) for e in fd.enum_type},
        "services": {
            s.name: {
                m.name: {
                    "input": m.input_type,
                    "output": m.output_type,
                    "client_streaming": m.client_streaming,
                    "server_streaming": m.server_streaming,
                }
                for m in s.method
            }
            for s in fd.service
        },
    }


def differences(ours: Any, upstream: Any, path: str = "") -> list[str]:
    """Human-readable differences between two shapes (empty when they are the same)."""
    if isinstance(ours, dict) and isinstance(upstream, dict):
        out: list[str] = []
        for key in sorted(set(ours) | set(upstream)):
            where = f"{path}.{key}" if path else str(key)
            if key not in ours:
                out.append(f"{where}: missing (upstream has {upstream[key]!r})")
            elif key not in upstream:
                out.append(f"{where}: not in upstream (ours is {ours[key]!r})")
            else:
                out.extend(differences(ours[key], upstream[key], where))
        return out
    return [] if ours == upstream else [f"{path}: ours {ours!r}, upstream {upstream!r}"]


def compare(upstream_dir: Path, proto_root: Path = PROTO_ROOT) -> dict[str, list[str]]:
    """Differences per our file name, for every file of :data:`KUBELET_PROTOS`."""
    result: dict[str, list[str]] = {}
    for ours, theirs in KUBELET_PROTOS.items():
        mine = shape(compile_file(proto_root, ours))
        upstream = shape(compile_file(upstream_dir, theirs))
        result[ours] = differences(mine, upstream)
    return result


def main() -> int:
    version = staging_version()
    try:
        diffs = compare(module_dir(version))
    except UpstreamError as exc:
        print(f"cannot compare the kubelet protos with {UPSTREAM_MODULE}@{version}: {exc}", file=sys.stderr)
        return 1
    bad = {name: d for name, d in diffs.items() if d}
    if bad:
        print(f"kubelet protos differ from {UPSTREAM_MODULE}@{version}:", file=sys.stderr)
        for name, lines in bad.items():
            print(f"  protos/{name} vs {KUBELET_PROTOS[name]}:", file=sys.stderr)
            for line in lines:
                print(f"    {line}", file=sys.stderr)
        return 1
    print(f"kubelet protos match {UPSTREAM_MODULE}@{version} ({len(diffs)} files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
