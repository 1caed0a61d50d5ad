"""Shared fixtures of the reference-driver tests; makes ``rd_harness`` importable."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))  # rd_harness

from rd_harness import DRIVER, Driver

from draflow_runtime.kube import DEVICE_CLASSES
from draflow_testenv.identity import ServiceIdentity
from reference_driver.fleet import Fleet
from reference_driver.settings import DriverSettings

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


# -- a driver on real sockets, reading claims from the real kube-apiserver -------------------------------


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def device_class(kube) -> AsyncIterator[str]:
    name = f"rd-gpu-{uuid.uuid4().hex[:6]}"
    await kube.create(DEVICE_CLASSES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    })
    yield name
    await kube.delete(DEVICE_CLASSES, name)


@pytest_asyncio.fixture(loop_scope="session")
async def driver_identity(make_namespace, service_identity) -> ServiceIdentity:
    """The driver's identity: the admin, and (a second run of each test using it) only the RBAC of
    deploy/kustomize/base/reference-driver. Test set-up keeps the admin ``kube``."""
    return await service_identity("reference-driver", await make_namespace("rd-id"))

@pytest_asyncio.fixture(loop_scope="session")
async def driver(driver_identity, short_tmp) -> AsyncIterator[Driver]:
    inventory_file = short_tmp / "inventory.json"
    inventory_file.write_text(json.dumps({"gpuCount": 8}))
    settings = DriverSettings(
        node_name=f"rd-{uuid.uuid4().hex[:6]}",
        registry_dir=str(short_tmp / "registry"), plugins_dir=str(short_tmp / "plugins"),
        cdi_root=str(short_tmp / "cdi"), state_dir=str(short_tmp / "state"),
        inventory_file=str(inventory_file), poll_interval=0.05, health_resend_interval=30, http_port=0,
    )
    fleet = Fleet(settings, driver_identity.kube)
    await fleet.start()
    drv = Driver(fleet, short_tmp)
    yield drv
    await drv.close()
