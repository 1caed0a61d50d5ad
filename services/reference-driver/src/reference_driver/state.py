"""Prepared claims of one node: the NodePrepareResources / NodeUnprepareResources logic.

:func:`plan_claim` is pure: from a ResourceClaim (as the API server serves it) and the node's devices it
computes what to prepare, or raises :class:`ClaimError`. :class:`DeviceState` does the I/O: CDI spec file
first (atomically), then the change as one record in the checkpoint's journal (:mod:`.store`), both in
one trip to a worker thread, one claim at a time under the node's lock; the answer waits, outside the
lock, until the record is durable (one ``fdatasync`` shared by the claims that wait together).

Contract (the same as upstream's kubeletplugin):
- prepare is idempotent: a claim already in the checkpoint returns the devices recorded there (its CDI
  file is rewritten if it went missing); the process that prepared it may have been another one;
- unprepare of a claim the driver does not know succeeds;
- each claim succeeds or fails on its own;
- the driver is the last line of defence: a device already prepared for another claim is refused
  (that claim's error) unless the device allows multiple allocations or either claim got it with
  ``adminAccess`` (DRAAdminAccess: an admin claim may be given a device in use) (:func:`check_exclusive`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_runtime.dra import allocation_results
from draflow_runtime.log import get_logger
from reference_driver import cdi, checkpoint
from reference_driver.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from reference_driver.config import ConfigError, base_request, configs_by_request
from reference_driver.inventory import device_uuid
from reference_driver.store import JOURNAL_SIZE, ClaimStore, Written, claims_after

log = get_logger(__name__)


class ClaimError(Exception):
    """Preparing one claim failed; the message goes into that claim's ``error`` in the response."""

    def __init__(self, message: str, *, claim_uid: str, field: str = "") -> None:
        super().__init__(message)
        self.claim_uid = claim_uid
        self.field = field


@dataclass(frozen=True)
class ClaimPlan:
    """What preparing one claim produces: the checkpoint entry and the CDI spec."""

    prepared: PreparedClaim
    spec: dict[str, Any]


@dataclass(frozen=True)
class DriverIdentity:
    driver_name: str
    cdi_class: str = "gpu"


def plan_claim(
    claim: Mapping[str, Any],
    *,
    uid: str,
    identity: DriverIdentity,
    node_name: str,
    devices: Mapping[tuple[str, str], inv.Device],
) -> ClaimPlan:
    """Validate an allocated claim and compute its devices, CDI IDs and CDI spec. Pure.

    Checks, each failing with :class:`ClaimError`: the UID matches (the claim was not replaced), the
    claim is allocated, it has results for this driver, every such result is a device of this node, and
    every opaque config for this driver decodes.
    """
    meta = claim.get("metadata", {})
    ref = f"{meta.get('namespace')}/{meta.get('name')}"
    allocation, results = check_claim(claim, uid, identity.driver_name)
    driver = identity.driver_name
    try:
        configs = configs_by_request(allocation, driver, [r["request"] for r in results])
    except ConfigError as exc:
        raise ClaimError(f"claim {ref}: {exc}", claim_uid=uid, field=exc.field) from exc

    prepared: list[PreparedDevice] = []
    cdi_devices: list[cdi.CdiDevice] = []
    for result in results:
        pool, name = result.get("pool", ""), result.get("device", "")
        device = devices.get((pool, name))
        if device is None:
            raise ClaimError(
                f"claim {ref}: device {pool}/{name} is not a device of node {node_name}", claim_uid=uid
            )
        share_id = result.get("shareID") or None
        env = dict(_sharing_env(configs[result["request"]]))
        for capacity, quantity in sorted((result.get("consumedCapacity") or {}).items()):
            env[cdi.env_key(capacity.rsplit("/", 1)[-1])] = str(quantity)
        cdi_devices.append(cdi.CdiDevice(device=name, uuid=device_uuid(device), share_id=share_id, env=env))
        cdi_name = cdi.device_name(uid, name, share_id)
        prepared.append(PreparedDevice(
            request_names=(base_request(result["request"]),),
            pool_name=pool,
            device_name=name,
            cdi_device_ids=(cdi.qualified_device_id(driver, identity.cdi_class, cdi_name),),
            share_id=share_id,
            admin_access=bool(result.get("adminAccess")),
        ))
    spec = cdi.render_claim_spec(driver, identity.cdi_class, uid, ref, cdi_devices)
    claim_entry = PreparedClaim(namespace=meta.get("namespace", ""), name=meta.get("name", ""),
                                devices=tuple(prepared))
    return ClaimPlan(prepared=claim_entry, spec=spec)


def check_claim(
    claim: Mapping[str, Any], uid: str, driver: str
) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    """The claim's allocation and this driver's results; :class:`ClaimError` if the UID differs (the
    claim was replaced), it is not allocated, or nothing is allocated from this driver."""
    meta = claim.get("metadata", {})
    ref = f"{meta.get('namespace')}/{meta.get('name')}"
    if meta.get("uid") != uid:
        raise ClaimError(f"claim {ref} has UID {meta.get('uid')}, not {uid}: it was replaced", claim_uid=uid)
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        raise ClaimError(f"claim {ref} is not allocated", claim_uid=uid)
    results = [r for r in allocation_results(allocation) if r.get("driver") == driver]
    if not results:
        raise ClaimError(f"claim {ref} has no devices allocated by driver {driver}", claim_uid=uid)
    return allocation, results


def check_exclusive(
    uid: str,
    claim: PreparedClaim,
    devices: Mapping[tuple[str, str], inv.Device],
    prepared: Mapping[str, PreparedClaim],
) -> None:
    """Raise :class:`ClaimError` if a device of ``claim`` (UID ``uid``) is already prepared for another
    claim in ``prepared`` and does not allow multiple allocations (``allowMultipleAllocations`` in
    ``devices``, the node's inventory). A device prepared with admin access, for ``claim`` or for the
    other claim, is shared (upstream allocates a device in use to an admin-access request). Pure."""
    holders: dict[tuple[str, str], tuple[str, PreparedClaim]] = {}
    for other_uid, other in prepared.items():
        if other_uid != uid:
            for d in other.devices:
                if not d.admin_access:
                    holders.setdefault((d.pool_name, d.device_name), (other_uid, other))
    for d in claim.devices:
        key = (d.pool_name, d.device_name)
        device = devices.get(key)
        if key not in holders or d.admin_access or (device is not None and device.allow_multiple_allocations):
            continue
        other_uid, other = holders[key]
        raise ClaimError(
            f"claim {claim.namespace}/{claim.name}: device {d.pool_name}/{d.device_name} is already prepared "
            f"for claim {other.namespace}/{other.name} (UID {other_uid}) and does not allow multiple "
            "allocations",
            claim_uid=uid,
        )


def _sharing_env(config: Any) -> dict[str, str]:
    return config.sharing.env() if config.sharing is not None else {}


class DeviceState:
    """The prepared claims of one node, backed by its checkpoint (snapshot + journal) and CDI directory.

    Every answer (prepared, unprepared, already prepared) is given only once the checkpoint holding it
    is durable: a driver killed right after answering still knows the claim when it comes back.
    """

    def __init__(
        self, *, identity: DriverIdentity, node_name: str, cdi_root: Path, state_dir: Path,
        journal_size: int = JOURNAL_SIZE,
    ) -> None:
        self.identity = identity
        self.node_name = node_name
        self.cdi_root = cdi_root
        self.checkpoint_path = state_dir / checkpoint.FILE_NAME
        self.store = ClaimStore(state_dir, node_name, journal_size=journal_size)
        self._checkpoint: Checkpoint = self.store.load()
        self._lock = asyncio.Lock()

    @property
    def prepared_claims(self) -> Mapping[str, PreparedClaim]:
        return self._checkpoint.prepared_claims

    async def prepare(
        self, uid: str, claim: Mapping[str, Any], devices: Mapping[tuple[str, str], inv.Device]
    ) -> tuple[PreparedDevice, ...]:
        """Prepare one claim (idempotent, durable once it returns). Raises :class:`ClaimError`.

        A claim already in the checkpoint returns the recorded devices even if the inventory changed
        since; only the claim's identity and allocation are checked again.
        """
        async with self._lock:
            existing = self._checkpoint.prepared_claims.get(uid)
            if existing is not None and self._spec_intact(uid):
                check_claim(claim, uid, self.identity.driver_name)
                written: Written | None = None  # recorded earlier: wait until that record is durable too
            else:
                plan = plan_claim(
                    claim, uid=uid, identity=self.identity, node_name=self.node_name, devices=devices
                )
                if existing is not None:  # the CDI file went missing: put it back, keep the recorded devices
                    await asyncio.to_thread(self._write_spec, uid, plan.spec)
                    written = None
                else:
                    check_exclusive(uid, plan.prepared, devices, self._checkpoint.prepared_claims)
                    # One trip to a thread for both files (each trip costs a thread wake-up and a loop
                    # wake-up): the spec first, so the checkpoint never names a claim without its spec.
                    written = await self._change(uid, plan.prepared, plan.spec)
                    existing = plan.prepared
                    log.info("claim prepared", claim_uid=uid,
                             devices=[d.device_name for d in existing.devices])
        await self._durable(written)
        return existing.devices

    async def unprepare(self, uid: str) -> None:
        """Unprepare one claim: remove its CDI spec, then forget it. Succeeds for unknown claims."""
        async with self._lock:
            if uid not in self._checkpoint.prepared_claims:
                if await asyncio.to_thread(self._remove_spec, uid):
                    log.info("removed CDI spec of a claim missing from the checkpoint", claim_uid=uid)
                written: Written | None = None
            else:
                written = await self._change(uid, None, None)
                log.info("claim unprepared", claim_uid=uid)
        await self._durable(written)

    async def _change(
        self, uid: str, claim: PreparedClaim | None, spec: Mapping[str, Any] | None
    ) -> Written:
        """Write the CDI spec (``claim``) or remove it (``None``), append the record; the node lock held."""
        record = checkpoint.record(uid, claim)
        if self.store.needs_switch(record):
            await self.store.switch(self._checkpoint)
        written = await asyncio.to_thread(self._files_and_record, uid, spec, record)
        self._checkpoint = claims_after(self._checkpoint, uid, claim)
        return written

    def _files_and_record(self, uid: str, spec: Mapping[str, Any] | None, record: bytes) -> Written:
        if spec is not None:
            self._write_spec(uid, spec)
        else:
            self._remove_spec(uid)
        return self.store.append(record)

    async def _durable(self, written: Written | None) -> None:
        """Wait until ``written`` (``None``: every change so far) is durable. A failed flush is repaired
        with a snapshot of the claims written in full (``OSError`` if that fails too)."""
        try:
            await self.store.sync(written)
        except OSError as exc:
            log.error("checkpoint journal flush failed, writing a full snapshot", error=str(exc))
            async with self._lock:
                await self.store.switch(self._checkpoint, wait=True)

    async def close(self) -> None:
        await self.store.close()

    def _spec_intact(self, uid: str) -> bool:
        return cdi.spec_intact(self.cdi_root, self.identity.driver_name, self.identity.cdi_class, uid)

    def _remove_spec(self, uid: str) -> bool:
        return cdi.remove_spec(self.cdi_root, self.identity.driver_name, self.identity.cdi_class, uid)

    def _spec_path(self, uid: str) -> Path:
        return self.cdi_root / cdi.spec_file_name(self.identity.driver_name, self.identity.cdi_class, uid)

    def _write_spec(self, uid: str, spec: Mapping[str, Any]) -> None:
        cdi.write_spec(self.cdi_root, self.identity.driver_name, self.identity.cdi_class, uid, spec)
