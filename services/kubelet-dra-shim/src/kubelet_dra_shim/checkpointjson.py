"""Encoding the kubelet's ``dra_manager_state`` (layout: :mod:`.checkpoint`), whole or claim by claim.

:func:`encode` is the pure reference: the bytes kubelet v1.37.1's Go code writes for the same claims.
:class:`ClaimEncoder` gives the same bytes while encoding only the claims marked changed since its last
call: a node's checkpoint is written twice per prepared pod (before and after the driver call, as the
kubelet does), and encoding every claim of the node each time made the checkpoint O(claims) of CPU on the
event loop per prepare (a fifth of the shim's samples under ``bench/prepare.py``). Each claim's
``ClaimInfoState`` is kept twice: as it stands in ``Data``, and as it stands inside the outer file, where
``Data`` is a JSON string (the same bytes with ``\\`` and ``"`` escaped: ``Data`` holds no control
characters, and ``<``, ``>``, ``&``, U+2028 and U+2029 are ``\\u`` escapes already), so neither
level is encoded again for an unchanged claim.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from draflow_runtime.gojson import go_escapes

if TYPE_CHECKING:
    from .checkpoint import ClaimInfo, PreparedDevice

KIND = "DRACheckpoint"
API_GROUP = "checkpoint.dra.kubelet.k8s.io"
API_VERSION = API_GROUP + "/v1"


def _go_json(value: Any) -> bytes:
    """``value`` as Go's ``json.Marshal`` writes it (dict keys in the given order; no floats here)."""
    return go_escapes(orjson.dumps(value))


def _nil_if_empty(items: list[str]) -> list[str] | None:
    return list(items) if items else None


def _device_to_json(dev: PreparedDevice) -> dict[str, Any]:
    return {
        "PoolName": dev.pool_name,
        "DeviceName": dev.device_name,
        "ShareID": dev.share_id,
        "RequestNames": _nil_if_empty(dev.request_names),
        "CDIDeviceIDs": _nil_if_empty(dev.cdi_device_ids),
    }


def _driver_state_to_json(info: ClaimInfo, driver: str) -> dict[str, Any]:
    devices = info.drivers[driver]
    out: dict[str, Any] = {"Devices": [_device_to_json(d) for d in devices] if devices else None}
    skips = info.skip_node_operations.get(driver)
    if skips:
        out["skipNodeOperations"] = list(skips)
    return out


def claim_to_json(info: ClaimInfo) -> dict[str, Any]:
    """One ``ClaimInfoState`` in the kubelet's JSON form (keys in its struct-field order)."""
    return {
        "ClaimUID": info.claim_uid,
        "ClaimName": info.claim_name,
        "Namespace": info.namespace,
        "PodUIDs": {pod_uid: {} for pod_uid in sorted(info.pod_uids)},
        "DriverState": {driver: _driver_state_to_json(info, driver) for driver in sorted(info.drivers)},
    }


def encode(claims: Mapping[str, ClaimInfo]) -> bytes:
    """The file content for ``claims``: the kubelet's bytes for them. Pure; claims sorted by UID."""
    data = _go_json(
        {
            "kind": KIND,
            "apiVersion": API_VERSION,
            "ClaimInfoStateList": [claim_to_json(claims[uid]) for uid in sorted(claims)],
        }
    )
    return _go_json({"Data": data.decode(), "Checksum": zlib.crc32(data)})


def _in_json_string(data: bytes) -> bytes:
    """Go-encoded JSON ``data`` as the body of a JSON string, as Go's encoder writes it."""
    return data.replace(b"\\", b"\\\\").replace(b'"', b'\\"')


_EMPTY_DATA = _go_json({"kind": KIND, "apiVersion": API_VERSION, "ClaimInfoStateList": []})
_DATA_HEAD, _DATA_TAIL = _EMPTY_DATA[:-2], _EMPTY_DATA[-2:]  # ...,"ClaimInfoStateList":[   and   ]}
_FILE_HEAD = b'{"Data":"' + _in_json_string(_DATA_HEAD)
_FILE_MIDDLE = _in_json_string(_DATA_TAIL) + b'","Checksum":'


class ClaimEncoder:
    """:func:`encode` for one node's live claim mapping, re-encoding only the claims marked changed.

    Whoever changes a ``ClaimInfo`` (its pods, drivers, devices or skipped operations) calls
    :meth:`changed` with its UID before the next :meth:`encode` that must show the change; claims added
    or removed from the mapping need no mark (an unknown UID is encoded, a gone one forgotten).
    """

    def __init__(self) -> None:
        self._parts: dict[str, tuple[bytes, bytes]] = {}  # claim UID -> (in Data, in the file)

    def changed(self, uids: Iterable[str] | None = None) -> None:
        """Forget the encodings of ``uids`` (``None``: of every claim)."""
        if uids is None:
            self._parts.clear()
            return
        for uid in uids:
            self._parts.pop(uid, None)

    def encode(self, claims: Mapping[str, ClaimInfo]) -> bytes:
        """The same bytes as ``encode(claims)``."""
        parts = self._parts
        for uid in parts.keys() - claims.keys():
            del parts[uid]
        inner: list[bytes] = []
        outer: list[bytes] = []
        for uid in sorted(claims):
            part = parts.get(uid)
            if part is None:
                data = _go_json(claim_to_json(claims[uid]))
                part = parts[uid] = (data, _in_json_string(data))
            inner.append(part[0])
            outer.append(part[1])
        checksum = zlib.crc32(_DATA_TAIL, zlib.crc32(b",".join(inner), zlib.crc32(_DATA_HEAD)))
        return b"".join((_FILE_HEAD, b",".join(outer), _FILE_MIDDLE, str(checksum).encode(), b"}"))
