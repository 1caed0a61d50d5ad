"""Shared fixtures of the reference-driver tests."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# -- a JSON-schema-like check of CDI spec files (fields and name rules of the CDI spec, v0.6/v0.7) --------

KNOWN_VERSIONS = {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"}
VENDOR = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
CLASS = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_-]*[A-Za-z0-9])?$")
DEVICE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=.*$")
TOP_LEVEL = {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}
EDITS = {"env", "deviceNodes", "hooks", "mounts", "intelRdt", "additionalGIDs"}


def validate_cdi_spec(spec: Any) -> list[str]:
    """Problems found in ``spec`` (empty when valid)."""
    problems: list[str] = []
    if not isinstance(spec, dict):
        return ["spec is not an object"]
    problems += [f"unknown field {k}" for k in spec if k not in TOP_LEVEL]
    if spec.get("cdiVersion") not in KNOWN_VERSIONS:
        problems.append(f"cdiVersion {spec.get('cdiVersion')!r} unknown")
    vendor, _, cls = str(spec.get("kind", "")).partition("/")
    if not VENDOR.match(vendor) or not CLASS.match(cls):
        problems.append(f"kind {spec.get('kind')!r} is not <vendor>/<class>")
    devices = spec.get("devices")
    if not isinstance(devices, list) or not devices:
        return [*problems, "devices must be a non-empty list"]
    names = [d.get("name") for d in devices]
    if len(set(names)) != len(names):
        problems.append("device names not unique")
    for device in devices:
        name = device.get("name", "")
        if not isinstance(name, str) or not DEVICE_NAME.match(name):
            problems.append(f"device name {name!r} invalid")
        edits = device.get("containerEdits")
        if not isinstance(edits, dict) or not edits:
            problems.append(f"device {name}: containerEdits missing")
            continue
        problems += [f"device {name}: unknown edit {k}" for k in edits if k not in EDITS]
        for env in edits.get("env", []):
            if not isinstance(env, str) or not ENV.match(env):
                problems.append(f"device {name}: env {env!r} is not KEY=VALUE")
    return problems


@pytest.fixture
def validate_cdi() -> Callable[[Any], list[str]]:
    """``validate_cdi(spec)`` -> list of problems (empty when the spec is valid CDI)."""
    return validate_cdi_spec


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir with a short path: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="rd-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
