"""The DRA manager's checkpoint: which claims a node prepared, for which pods, with which devices.

The file format follows the kubelet's ``dra_manager_state`` (``pkg/kubelet/cm/dra/state``)::

    {"Data": "<json string>", "Checksum": <crc32 IEEE of the Data string's UTF-8 bytes>}

    Data = {"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1",
            "BootID": "<boot id when written>",                      # draflow addition
            "Entries": [{"ClaimUID", "ClaimName", "Namespace", "PodUIDs": {uid: {}},
                         "DriverState": {driver: {"Devices": [{"PoolName", "DeviceName", "ShareID",
                                                               "RequestNames", "CDIDeviceIDs"}]}}}]}

The ``BootID`` lets the shim tell a process restart from a node reboot (a reboot loses tmpfs CDI specs
and device state, so the checkpoint must be repaired, never trusted). Encoding and decoding are pure
functions; :func:`write` and :func:`read` are the only I/O (``draflow_runtime.files.atomic_write``:
temp file, fsync, rename, fsync of the directory), so a crash leaves the old or the new file, never a
torn one.

Errors::

    CheckpointError                 (DraflowError)
     └── CorruptCheckpoint          bad JSON, wrong kind/apiVersion, or checksum mismatch
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from draflow_runtime.errors import DraflowError
from draflow_runtime.files import atomic_write

KIND = "DRACheckpoint"
API_VERSION = "checkpoint.dra.kubelet.k8s.io/v1"
FILE_NAME = "dra_manager_state"


class CheckpointError(DraflowError):
    """The checkpoint could not be read or written."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CorruptCheckpoint(CheckpointError):
    """The checkpoint file exists but its content is not a valid checkpoint."""


@dataclass
class PreparedDevice:
    """One device a driver prepared for a claim (the driver's ``Device`` message)."""

    pool_name: str
    device_name: str
    request_names: list[str] = field(default_factory=list)
    cdi_device_ids: list[str] = field(default_factory=list)
    share_id: str | None = None


@dataclass
class ClaimInfo:
    """What the node knows about one claim; enough to unprepare it without the API server.

    ``drivers`` maps every driver named in the claim's allocation to the devices it prepared (empty
    until that driver answered). ``prepared`` is in-memory only: after a restart every claim starts
    unprepared, so it is prepared again once (drivers are idempotent).
    """

    claim_uid: str
    claim_name: str
    namespace: str
    pod_uids: set[str] = field(default_factory=set)
    drivers: dict[str, list[PreparedDevice]] = field(default_factory=dict)
    prepared: bool = False

    def cdi_ids_for(self, request: str | None) -> list[str]:
        """CDI device IDs for a container's claim reference, filtered like kubelet's GetResources.

        An empty ``request`` (the container uses the whole claim) or a device without request names
        matches every device; otherwise the request must be one of the device's request names.
        """
        ids: list[str] = []
        for devices in self.drivers.values():
            for dev in devices:
                if request and dev.request_names and request not in dev.request_names:
                    continue
                for cdi_id in dev.cdi_device_ids:
                    if cdi_id not in ids:
                        ids.append(cdi_id)
        return ids


@dataclass
class CheckpointState:
    boot_id: str
    claims: dict[str, ClaimInfo]  # by claim UID


def _device_to_json(dev: PreparedDevice) -> dict[str, Any]:
    return {
        "PoolName": dev.pool_name,
        "DeviceName": dev.device_name,
        "ShareID": dev.share_id,
        "RequestNames": list(dev.request_names),
        "CDIDeviceIDs": list(dev.cdi_device_ids),
    }


def _device_from_json(raw: dict[str, Any]) -> PreparedDevice:
    return PreparedDevice(
        pool_name=raw.get("PoolName", ""),
        device_name=raw.get("DeviceName", ""),
        request_names=list(raw.get("RequestNames") or []),
        cdi_device_ids=list(raw.get("CDIDeviceIDs") or []),
        share_id=raw.get("ShareID"),
    )


def encode(state: CheckpointState) -> bytes:
    """The file content for ``state``. Pure; entries are sorted so equal states give equal bytes."""
    entries = []
    for uid in sorted(state.claims):
        info = state.claims[uid]
        entries.append(
            {
                "ClaimUID": info.claim_uid,
                "ClaimName": info.claim_name,
                "Namespace": info.namespace,
                "PodUIDs": {pod_uid: {} for pod_uid in sorted(info.pod_uids)},
                "DriverState": {
                    driver: {"Devices": [_device_to_json(d) for d in info.drivers[driver]]}
                    for driver in sorted(info.drivers)
                },
            }
        )
    data = orjson.dumps(
        {"kind": KIND, "apiVersion": API_VERSION, "BootID": state.boot_id, "Entries": entries}
    ).decode()
    return orjson.dumps({"Data": data, "Checksum": zlib.crc32(data.encode())})


def decode(content: bytes, *, path: str | None = None) -> CheckpointState:
    """Parse file content. Raises :class:`CorruptCheckpoint`; every loaded claim is unprepared."""
    try:
        outer = orjson.loads(content)
        data = outer["Data"]
        checksum = int(outer["Checksum"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CorruptCheckpoint(
            f"checkpoint is not valid JSON with Data and Checksum: {exc}", path=path
        ) from exc
    if zlib.crc32(data.encode()) != checksum:
        raise CorruptCheckpoint("checkpoint checksum mismatch", path=path)
    try:
        inner = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorruptCheckpoint(f"checkpoint Data is not JSON: {exc}", path=path) from exc
    if inner.get("kind") != KIND or inner.get("apiVersion") != API_VERSION:
        raise CorruptCheckpoint(
            f"unexpected checkpoint kind/apiVersion {inner.get('kind')}/{inner.get('apiVersion')}", path=path
        )
    claims: dict[str, ClaimInfo] = {}
    for entry in inner.get("Entries") or []:
        info = ClaimInfo(
            claim_uid=entry["ClaimUID"],
            claim_name=entry.get("ClaimName", ""),
            namespace=entry.get("Namespace", ""),
            pod_uids=set((entry.get("PodUIDs") or {}).keys()),
            drivers={
                driver: [_device_from_json(d) for d in (st or {}).get("Devices") or []]
                for driver, st in (entry.get("DriverState") or {}).items()
            },
        )
        claims[info.claim_uid] = info
    return CheckpointState(boot_id=inner.get("BootID", ""), claims=claims)


def write(path: Path, content: bytes) -> None:
    """Store an encoded checkpoint durably (owner-only file). Blocking: use ``asyncio.to_thread``."""
    atomic_write(path, content, mode=0o600)


def read(path: Path) -> CheckpointState | None:
    """The checkpoint at ``path``; ``None`` when there is none. Raises :class:`CorruptCheckpoint`."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint: {exc}", path=str(path)) from exc
    return decode(content, path=str(path))


def read_boot_id(path: str) -> str:
    """The kernel's boot ID (``/proc/sys/kernel/random/boot_id`` unless overridden); "" if unreadable."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""
