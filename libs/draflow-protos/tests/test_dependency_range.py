"""The grpcio/protobuf range is declared once, in draflow-protos, and its floors are the generated code's.

``*_pb2_grpc.py`` refuses a grpcio older than the grpcio-tools that generated it (``GRPC_GENERATED_VERSION``),
``*_pb2.py`` a protobuf runtime older than its gencode (``# Protobuf Python Version:``) or of another major.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

from draflow_testenv.binaries import repo_root

ROOT = repo_root()
PROTOS_PYPROJECT = ROOT / "libs" / "draflow-protos" / "pyproject.toml"
GEN = ROOT / "libs" / "draflow-protos" / "src" / "draflow_protos"
RANGED = ("grpcio", "protobuf")


def _pyprojects() -> list[Path]:
    return [ROOT / "pyproject.toml", *sorted(ROOT.glob("libs/*/pyproject.toml")),
            *sorted(ROOT.glob("services/*/pyproject.toml"))]


def _requirements(pyproject: Path) -> list[Requirement]:
    data: dict[str, Any] = tomllib.loads(pyproject.read_text())
    lines = list(data.get("project", {}).get("dependencies", []))
    for group in data.get("dependency-groups", {}).values():
        lines += [g for g in group if isinstance(g, str)]
    for extra in data.get("project", {}).get("optional-dependencies", {}).values():
        lines += extra
    return [Requirement(line) for line in lines]


def _declared(name: str) -> Requirement:
    (req,) = [r for r in _requirements(PROTOS_PYPROJECT) if r.name == name]
    return req


def _floor(req: Requirement) -> Version:
    (floor,) = [Version(s.version) for s in req.specifier if s.operator == ">="]
    return floor


def _stamps(pattern: str, suffix: str) -> set[Version]:
    found = {Version(m.group(1)) for f in GEN.rglob("*" + suffix) if (m := re.search(pattern, f.read_text()))}
    assert found, f"no {suffix} files with a version stamp under {GEN}"
    return found


def test_grpcio_and_protobuf_are_declared_only_in_draflow_protos() -> None:
    repeated = [
        f"{p.relative_to(ROOT)}: {r}" for p in _pyprojects() if p != PROTOS_PYPROJECT
        for r in _requirements(p) if r.name in RANGED
    ]
    assert repeated == []


def test_grpcio_floor_is_the_generated_code_version() -> None:
    (generated,) = _stamps(r"GRPC_GENERATED_VERSION = '([^']+)'", "_pb2_grpc.py")
    assert _floor(_declared("grpcio")) == generated
    assert not _declared("grpcio").specifier.contains(Version(f"{generated.major + 1}.0"))
    (tools,) = [r for r in _requirements(ROOT / "pyproject.toml") if r.name == "grpcio-tools"]
    assert str(tools.specifier) == f"=={generated}", "the dev group's grpcio-tools made the checked-in code"


def test_protobuf_range_is_the_gencode_major_from_its_version() -> None:
    (gencode,) = _stamps(r"# Protobuf Python Version: (\S+)", "_pb2.py")
    assert _floor(_declared("protobuf")) == gencode
    assert not _declared("protobuf").specifier.contains(Version(f"{gencode.major + 1}.0"))
    (stubs,) = [r for r in _requirements(ROOT / "pyproject.toml") if r.name == "types-protobuf"]
    assert gencode in stubs.specifier and not stubs.specifier.contains(Version(f"{gencode.major + 1}.0"))
