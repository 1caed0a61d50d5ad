"""Device health of one node, driven by a control file so tests (and people) can break a fake GPU.

The control file is ``<state dir>/health.json`` (per node; in fleet mode ``<root>/<node>/state``)::

    {"devices": {"gpu-3": {"health": "Unhealthy", "message": "fell off the bus"}}}

``health`` is ``Healthy``, ``Unhealthy`` or ``Unknown`` (case-insensitive); devices not listed are
Healthy, names that are not devices of the node are ignored, and a missing file means all healthy. The
file is polled (see ``--poll-interval``); an invalid file is logged and the previous state kept. Write it
atomically (temp file + rename) to avoid reading half of it.

Health is reported two ways: ``DRAResourceHealth.NodeWatchResources`` (:func:`health_response`, the full
device list per message, served as ``v1.DRAResourceHealth`` and ``v1alpha1.DRAResourceHealth``) and, with
``--taint-unhealthy-devices``, as a ``<driver>/unhealthy`` NoSchedule taint on the device in the inventory
stream (:func:`apply_health_taints`), so slice-publisher publishes it and the allocator avoids the device.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

# The HealthStatus values are the same in v1 and v1alpha1 (UNKNOWN 0, HEALTHY 1, UNHEALTHY 2).
from draflow_protos.drahealth.v1 import api_pb2 as health_pb
from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_runtime.log import get_logger

log = get_logger(__name__)

FILE_NAME = "health.json"
_STATUS = {
    "healthy": health_pb.HEALTHY,
    "unhealthy": health_pb.UNHEALTHY,
    "unknown": health_pb.UNKNOWN,
}


@dataclass(frozen=True)
class DeviceStatus:
    health: int  # health_pb.HealthStatus value
    message: str = ""


class HealthFileError(ValueError):
    pass


def parse_health_file(raw: bytes) -> dict[str, DeviceStatus]:
    """Device name -> status from the control file's content. Raises :class:`HealthFileError`."""
    try:
        data = json.loads(raw or b"{}")
    except ValueError as exc:
        raise HealthFileError(f"not JSON: {exc}") from exc
    devices = data.get("devices", {}) if isinstance(data, dict) else None
    if not isinstance(devices, dict):
        raise HealthFileError("want {\"devices\": {\"<device>\": {\"health\": ..., \"message\": ...}}}")
    result = {}
    for name, entry in devices.items():
        if not isinstance(entry, dict) or str(entry.get("health", "")).lower() not in _STATUS:
            raise HealthFileError(f"devices.{name}.health: want Healthy, Unhealthy or Unknown")
        result[name] = DeviceStatus(_STATUS[str(entry["health"]).lower()], str(entry.get("message", "")))
    return result


@dataclass
class HealthControl:
    """The polled control file of one node."""

    path: Path
    statuses: dict[str, DeviceStatus] = field(default_factory=dict)
    updated: float = field(default_factory=time.time)
    _stamp: tuple[int, int, int] | None = None

    def poll(self) -> bool:
        """Re-read the file if it changed; True if any device's status changed."""
        try:
            st = self.path.stat()
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            statuses = parse_health_file(self.path.read_bytes()) if stamp else {}
        except (OSError, HealthFileError) as exc:
            log.warning("health control file invalid, keeping the previous state", path=str(self.path),
                        error=str(exc))
            return False
        if statuses == self.statuses:
            return False
        self.statuses = statuses
        self.updated = time.time()
        log.info("device health changed", path=str(self.path),
                 unhealthy=sorted(n for n, s in statuses.items() if s.health == health_pb.UNHEALTHY))
        return True

    def status(self, device: str) -> DeviceStatus:
        return self.statuses.get(device, DeviceStatus(health_pb.HEALTHY))


def health_response(
    pool: inv.Pool, control: HealthControl, timeout_seconds: int, pb: ModuleType = health_pb
) -> Any:
    """Every device of the pool with its health (the full list, as the kubelet expects), as a
    ``NodeWatchResourcesResponse`` of the ``api_pb2`` module ``pb`` (dra-health v1 or v1alpha1)."""
    now = int(time.time())
    response = pb.NodeWatchResourcesResponse()
    for device in pool.devices:
        status = control.status(device.name)
        response.devices.append(pb.DeviceHealth(
            device=pb.DeviceIdentifier(pool_name=pool.name, device_name=device.name),
            health=status.health,
            last_updated_time=now,
            health_check_timeout_seconds=timeout_seconds,
            message=status.message,
        ))
    return response


def unhealthy_taint_key(driver_name: str) -> str:
    return f"{driver_name}/unhealthy"


def apply_health_taints(pool: inv.Pool, statuses: Mapping[str, DeviceStatus], driver_name: str) -> inv.Pool:
    """A copy of ``pool`` where every UNHEALTHY device carries a ``<driver>/unhealthy`` NoSchedule taint."""
    unhealthy = {name for name, s in statuses.items() if s.health == health_pb.UNHEALTHY}
    if not unhealthy.intersection(d.name for d in pool.devices):
        return pool
    tainted = inv.Pool()
    tainted.CopyFrom(pool)
    for device in tainted.devices:
        if device.name in unhealthy:
            device.taints.append(inv.DeviceTaint(key=unhealthy_taint_key(driver_name), effect="NoSchedule"))
    return tainted
