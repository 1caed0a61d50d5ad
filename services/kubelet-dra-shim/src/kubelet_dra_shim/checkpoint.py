"""The DRA manager's checkpoint: which claims a node prepared, for which pods, with which devices.

The file is the kubelet's ``dra_manager_state`` exactly as kubelet v1.37.1 writes it
(``k8s.io/kubernetes/pkg/kubelet/cm/dra/state``, encoded by Go's ``encoding/json``), so a real kubelet
reads the claims the shim prepared and the shim reads the claims a kubelet prepared::

    {"Data":"<json string>","Checksum":<crc32 IEEE of the Data string's UTF-8 bytes>}

    Data = {"kind":"DRACheckpoint","apiVersion":"checkpoint.dra.kubelet.k8s.io/v1",
            "ClaimInfoStateList":[{"ClaimUID","ClaimName","Namespace","PodUIDs":{uid:{}},
                "DriverState":{driver:{"Devices":[{"PoolName","DeviceName","ShareID","RequestNames",
                                                   "CDIDeviceIDs"}] | null,
                                       "skipNodeOperations":[...]}}}]}     # omitted when empty

Keys in Go's struct-field order, map keys sorted, ``null`` for empty device and name lists (Go's nil
slices), ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as Go escapes them: :func:`encode` gives the bytes
the kubelet's own code gives for the same claims (tests compare them with hack/kubelet-checkpoint). It
lives in :mod:`.checkpointjson` with :class:`~.checkpointjson.ClaimEncoder`, the same bytes encoding only
the claims that changed, which :class:`NodeCheckpoint` uses.

Older draflow versions wrote ``Data = {kind, apiVersion, BootID, Entries: [...]}``; the kubelet reads
that as zero claims. :func:`decode` reads both layouts and reports the old one (``legacy``), which the
manager rewrites in the current layout at once.

The boot ID the shim uses to tell a process restart from a node reboot (a reboot loses tmpfs CDI specs
and device state, so the checkpoint must be repaired, never trusted) lives beside the file, in
``dra_manager_state.boot_id`` (see :class:`NodeCheckpoint`). It becomes the current boot's only after the
checkpoint is written with every claim prepared in this boot, so a crash at any point makes the next
start re-prepare (safe), never trust claims a reboot destroyed.

Encoding and decoding are pure functions; :func:`write`, :func:`read` and :func:`write_boot_id` are the
only I/O (``draflow_runtime.files.atomic_write``: temp file, fsync, rename, fsync of the directory), so
a crash leaves the old or the new file, never a torn one.

Errors::

    CheckpointError                 (DraflowError)
     └── CorruptCheckpoint          bad JSON, wrong kind/apiVersion, checksum mismatch or malformed claims
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from draflow_runtime.errors import DraflowError
from draflow_runtime.files import atomic_write
from draflow_runtime.log import get_logger

from .checkpointjson import API_GROUP, KIND, ClaimEncoder, encode
from .checkpointjson import API_VERSION as API_VERSION  # re-exported: the layout's names live here too
from .checkpointjson import claim_to_json as claim_to_json

log = get_logger(__name__)

FILE_NAME = "dra_manager_state"
BOOT_ID_SUFFIX = ".boot_id"
KUBELET_VERSION = "v1.37.1"  # the kubelet whose checkpoint layout this module writes


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
    until that driver answered). ``skip_node_operations`` is the kubelet's per-driver
    ``skipNodeOperations``, kept from a kubelet-written checkpoint and written back unchanged.
    ``prepared`` is in-memory only: after a restart every claim starts unprepared, so it is prepared
    again once (drivers are idempotent). ``unpreparing`` (in-memory too) is kubelet's ``unpreparing``:
    the last pods are gone and the drivers are being (or failed to be) asked to unprepare the claim; the
    info stays whole (every driver, its devices, those pods) until all of them succeeded, and no new
    pod may use the claim meanwhile.
    """

    claim_uid: str
    claim_name: str
    namespace: str
    pod_uids: set[str] = field(default_factory=set)
    drivers: dict[str, list[PreparedDevice]] = field(default_factory=dict)
    prepared: bool = False
    unpreparing: bool = False
    skip_node_operations: dict[str, list[str]] = field(default_factory=dict)

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
    boot_id: str  # "" when unknown (a kubelet-written file without the draflow boot ID beside it)
    claims: dict[str, ClaimInfo]  # by claim UID
    legacy: bool = False  # read from the old draflow ``Entries`` layout


# --- decoding ------------------------------------------------------------------------------------------


def _strings(raw: Any, what: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise TypeError(f"{what} is not a list of strings")
    return list(raw)


def _string(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value


def _device_from_json(raw: Mapping[str, Any]) -> PreparedDevice:
    share_id = raw.get("ShareID")
    if share_id is not None and not isinstance(share_id, str):
        raise TypeError("ShareID is not a string")
    return PreparedDevice(
        pool_name=_string(raw, "PoolName"),
        device_name=_string(raw, "DeviceName"),
        request_names=_strings(raw.get("RequestNames"), "RequestNames"),
        cdi_device_ids=_strings(raw.get("CDIDeviceIDs"), "CDIDeviceIDs"),
        share_id=share_id,
    )


def _claim_from_json(entry: Mapping[str, Any]) -> ClaimInfo:
    uid = entry["ClaimUID"]
    if not isinstance(uid, str) or not uid:
        raise TypeError("ClaimUID is not a non-empty string")
    info = ClaimInfo(
        claim_uid=uid,
        claim_name=_string(entry, "ClaimName"),
        namespace=_string(entry, "Namespace"),
        pod_uids=set(entry.get("PodUIDs") or {}),
    )
    for driver, state in (entry.get("DriverState") or {}).items():
        state = state or {}
        info.drivers[driver] = [_device_from_json(d) for d in state.get("Devices") or []]
        skips = _strings(state.get("skipNodeOperations"), "skipNodeOperations")
        if skips:
            info.skip_node_operations[driver] = skips
    return info


def decode(content: bytes, *, path: str | None = None) -> CheckpointState:
    """Parse file content (either layout). Raises :class:`CorruptCheckpoint`; every claim is unprepared.

    ``boot_id`` is the one an old-layout file carries inside, else "" (see :func:`read`).
    """
    try:
        outer = orjson.loads(content)
        data = outer["Data"]
        checksum = int(outer["Checksum"])
        data_bytes = data.encode()
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptCheckpoint(
            f"checkpoint is not valid JSON with Data and Checksum: {exc}", path=path
        ) from exc
    if zlib.crc32(data_bytes) != checksum:
        raise CorruptCheckpoint("checkpoint checksum mismatch", path=path)
    try:
        inner = orjson.loads(data_bytes)
    except orjson.JSONDecodeError as exc:
        raise CorruptCheckpoint(f"checkpoint Data is not JSON: {exc}", path=path) from exc
    if not isinstance(inner, dict):
        raise CorruptCheckpoint("checkpoint Data is not a JSON object", path=path)
    kind, api_version = inner.get("kind"), inner.get("apiVersion")
    if kind != KIND or not isinstance(api_version, str) or not api_version.startswith(API_GROUP + "/"):
        raise CorruptCheckpoint(f"unexpected checkpoint kind/apiVersion {kind}/{api_version}", path=path)
    legacy = "ClaimInfoStateList" not in inner and "Entries" in inner
    entries = inner.get("Entries" if legacy else "ClaimInfoStateList") or []
    claims: dict[str, ClaimInfo] = {}
    try:
        for entry in entries:
            info = _claim_from_json(entry)
            claims[info.claim_uid] = info
    except (KeyError, TypeError, AttributeError) as exc:
        raise CorruptCheckpoint(f"checkpoint claim entry is malformed: {exc!r}", path=path) from exc
    boot_id = inner.get("BootID") if legacy else None
    return CheckpointState(boot_id=boot_id if isinstance(boot_id, str) else "", claims=claims, legacy=legacy)


# --- files ---------------------------------------------------------------------------------------------


def boot_id_path(path: Path) -> Path:
    """Where the boot ID of the checkpoint at ``path`` is kept (beside it)."""
    return path.with_name(path.name + BOOT_ID_SUFFIX)


def write(path: Path, content: bytes) -> None:
    """Store an encoded checkpoint durably (owner-only file). Blocking: use ``asyncio.to_thread``."""
    atomic_write(path, content, mode=0o600)


def write_boot_id(path: Path, boot_id: str) -> None:
    """Record ``boot_id`` beside the checkpoint at ``path``; call after :func:`write`. Blocking."""
    atomic_write(boot_id_path(path), (boot_id + "\n").encode(), mode=0o600)


def read(path: Path) -> CheckpointState | None:
    """The checkpoint at ``path``; ``None`` when there is none. Raises :class:`CorruptCheckpoint`.

    The boot ID comes from the file beside it (an old-layout file's own boot ID when there is none).
    """
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint: {exc}", path=str(path)) from exc
    state = decode(content, path=str(path))
    try:
        state.boot_id = boot_id_path(path).read_text().strip()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint boot ID: {exc}", path=str(path)) from exc
    return state


class NodeCheckpoint:
    """One node's checkpoint file and the boot ID beside it.

    :meth:`save` may be called by several coroutines at once (prepares of different claims run side by
    side): writes are serialised and each encodes the claims as they are when it starts, so the file
    never goes back to an older state. A save returns once a write that started after it was called is
    on disk; saves that queued up behind one write share the next (one fsync for all of them). Only the
    claims a save names as changed are encoded again (:class:`~.checkpointjson.ClaimEncoder`).
    """

    def __init__(self, path: Path, boot_id: str) -> None:
        self.path = path
        self.boot_id = boot_id  # the current boot's
        self._boot_id_written = False
        self._lock = asyncio.Lock()
        self._requested = 0  # saves asked for
        self._written = 0  # the last save request covered by a completed write
        self._encoder = ClaimEncoder()

    async def load(self) -> CheckpointState | None:
        """:func:`read`; a file in the old ``Entries`` layout is rewritten in the kubelet's at once (its
        boot ID first, beside it). The directory is made if missing, so one that cannot be fails here, at
        start (as kubelet's ``NewManager``), not at the first prepare. Raises :class:`CheckpointError`."""
        await asyncio.to_thread(self._make_dir)
        state = await asyncio.to_thread(read, self.path)
        self._encoder.changed(None)  # the caller's claims are new objects now
        if state is not None and state.legacy:
            await asyncio.to_thread(self._migrate, state)
            log.warning(
                "checkpoint migrated from the old Entries layout to the kubelet's",
                path=str(self.path),
                claims=len(state.claims),
                kubelet=KUBELET_VERSION,
            )
        return state

    def _make_dir(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(f"cannot make the checkpoint directory {self.path.parent}: {exc}",
                                  path=str(self.path)) from exc

    def _migrate(self, state: CheckpointState) -> None:
        if state.boot_id:
            write_boot_id(self.path, state.boot_id)
        write(self.path, encode(state.claims))

    async def save(self, claims: Mapping[str, ClaimInfo], changed: Iterable[str] | None = None) -> None:
        """Write ``claims`` (durably, see the class docstring); the first time every claim is prepared,
        record this boot's ID beside them. ``claims`` is the node's one live mapping, the same object in
        every call (a later write stores an earlier call's changes only because of that). ``changed``:
        the UIDs of the claims whose content changed since the caller's last save (claims added to or
        removed from the mapping need not be named); ``None``: any claim may have changed."""
        self._encoder.changed(changed)
        self._requested += 1
        mine = self._requested
        async with self._lock:
            if self._written >= mine:
                return  # a write that started after this call already stored these claims
            covered = self._requested
            content = self._encoder.encode(claims)
            mark = not self._boot_id_written and all(info.prepared for info in claims.values())
            await asyncio.to_thread(self._save, content, mark)
            self._written = covered

    def _save(self, content: bytes, mark_boot: bool) -> None:
        write(self.path, content)
        if mark_boot:
            write_boot_id(self.path, self.boot_id)
            self._boot_id_written = True


def read_boot_id(path: str) -> str:
    """The kernel's boot ID (``/proc/sys/kernel/random/boot_id`` unless overridden); "" if unreadable."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""
