"""The driver's checkpoint: which claims are prepared on a node, with which devices.

File format (JSON), in the style of the kubelet's checkpoint manager::

    {"checksum": <crc32 of data>, "data": "<JSON text of the payload>"}

    payload = {"apiVersion": "checkpoint.reference-driver.draflow.dev/v1", "kind": "DriverCheckpoint",
               "node": "<node>",
               "preparedClaims": {"<claim uid>": {"namespace": ..., "name": ..., "devices": [
                   {"requestNames": [...], "poolName": ..., "deviceName": ..., "shareID": null,
                    "cdiDeviceIDs": [...], "adminAccess": true}]}},    # adminAccess only when true
               "journalEpoch": <int>}                                # absent (0) in older files

:func:`encode` and :func:`decode` are pure; :func:`decode` raises :class:`CheckpointCorrupted` on a
checksum mismatch or an unknown version. :func:`save` writes atomically (temp file, fsync, rename, fsync
of the directory), so a crash leaves either the old or the new checkpoint, never a torn one.

The file is a snapshot: the changes since are records in the journal of its ``journalEpoch``
(:mod:`reference_driver.store`), whose :func:`record` and :func:`apply_record` live here too.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draflow_runtime.files import atomic_write

API_VERSION = "checkpoint.reference-driver.draflow.dev/v1"
KIND = "DriverCheckpoint"
FILE_NAME = "checkpoint.json"


class CheckpointCorrupted(Exception):
    """The checkpoint file exists but cannot be trusted."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"checkpoint {path} is corrupted: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class PreparedDevice:
    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...]
    share_id: str | None = None
    admin_access: bool = False  # allocated with adminAccess: shares the device with any other claim

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requestNames": list(self.request_names),
            "poolName": self.pool_name,
            "deviceName": self.device_name,
            "shareID": self.share_id,
            "cdiDeviceIDs": list(self.cdi_device_ids),
        }
        if self.admin_access:
            out["adminAccess"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PreparedDevice:
        return cls(
            request_names=tuple(data["requestNames"]),
            pool_name=data["poolName"],
            device_name=data["deviceName"],
            cdi_device_ids=tuple(data["cdiDeviceIDs"]),
            share_id=data.get("shareID"),
            admin_access=bool(data.get("adminAccess", False)),
        )


@dataclass(frozen=True)
class PreparedClaim:
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]

    def to_json(self) -> dict[str, Any]:
        devices = [d.to_json() for d in self.devices]
        return {"namespace": self.namespace, "name": self.name, "devices": devices}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PreparedClaim:
        return cls(
            namespace=data["namespace"],
            name=data["name"],
            devices=tuple(PreparedDevice.from_json(d) for d in data["devices"]),
        )


@dataclass
class Checkpoint:
    node: str
    prepared_claims: dict[str, PreparedClaim] = field(default_factory=dict)
    journal_epoch: int = 0  # the journal records of this epoch (then of the next) apply on top


def _checksum(data: str) -> int:
    return zlib.crc32(data.encode())


def encode(checkpoint: Checkpoint) -> bytes:
    payload = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "node": checkpoint.node,
        "preparedClaims": {uid: c.to_json() for uid, c in sorted(checkpoint.prepared_claims.items())},
        "journalEpoch": checkpoint.journal_epoch,
    }
    data = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return json.dumps({"checksum": _checksum(data), "data": data}, indent=1).encode() + b"\n"


def decode(raw: bytes, path: str = "<checkpoint>") -> Checkpoint:
    try:
        outer = json.loads(raw)
        data, checksum = outer["data"], outer["checksum"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointCorrupted(path, f"not a checkpoint envelope: {exc}") from exc
    if not isinstance(data, str) or _checksum(data) != checksum:
        raise CheckpointCorrupted(path, "checksum mismatch")
    try:
        payload = json.loads(data)
        if payload.get("apiVersion") != API_VERSION or payload.get("kind") != KIND:
            version = f"{payload.get('apiVersion')}/{payload.get('kind')}"
            raise CheckpointCorrupted(path, f"unknown version {version}")
        claims = {uid: PreparedClaim.from_json(c) for uid, c in payload["preparedClaims"].items()}
        epoch = payload.get("journalEpoch", 0)
        if not isinstance(epoch, int) or epoch < 0:
            raise CheckpointCorrupted(path, f"journalEpoch {epoch!r} is not a count")
        return Checkpoint(node=payload["node"], prepared_claims=claims, journal_epoch=epoch)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointCorrupted(path, f"invalid payload: {exc}") from exc


def load(path: Path, node: str) -> Checkpoint:
    """The checkpoint at ``path``; an empty one if there is no file. Raises :class:`CheckpointCorrupted`."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Checkpoint(node=node)
    return decode(raw, str(path))


def save(path: Path, checkpoint: Checkpoint) -> None:
    """Write atomically and durably (temp file, fsync, rename, fsync of the directory): the journal
    of the previous epoch is reused only once this snapshot survives a power loss. Blocking."""
    atomic_write(path, encode(checkpoint), mode=0o600, durability="full")


# --- journal records: one prepared or unprepared claim ------------------------------------------------


def record(uid: str, claim: PreparedClaim | None) -> bytes:
    """The journal record of preparing ``claim`` (``None``: unpreparing) under ``uid``. Pure."""
    body: dict[str, Any] = {"op": "unprepare", "uid": uid} if claim is None else {
        "op": "prepare", "uid": uid, "claim": claim.to_json()}
    return json.dumps(body, separators=(",", ":")).encode()


def apply_record(claims: dict[str, PreparedClaim], raw: bytes, path: str = "<journal>") -> None:
    """Apply one journal record to ``claims`` (in place). Raises :class:`CheckpointCorrupted` for a
    record that passed the journal's checksum but does not parse (a bug, not a torn write)."""
    try:
        body = json.loads(raw)
        if body["op"] == "prepare":
            claims[body["uid"]] = PreparedClaim.from_json(body["claim"])
        elif body["op"] == "unprepare":
            claims.pop(body["uid"], None)
        else:
            raise ValueError(f"unknown op {body['op']!r}")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointCorrupted(path, f"invalid journal record: {exc}") from exc
