"""The assume cache: which devices are in use, counting allocations not yet visible in the informer.

Every claim has at most one *effective* allocation, by claim UID:

* the informer's ``status.allocation`` (what the API server has), unless
* an **assumed** allocation exists for that claim: recorded by the decision loop before any write
  (:meth:`AssumeCache.assume`). It stays until the informer shows the claim allocated (the write landed;
  the informer then wins) or the write pipeline gives it up (:meth:`release`). A stale informer event
  without an allocation never drops an assumption: that is how a device is never handed out twice
  between the decision and the informer catching up (upstream #136269).

**Shared pending allocations** (a pod-group cycle, :mod:`.gang`): a later member of the group that
uses a claim an earlier member of the same cycle allocated joins that assumption (:meth:`AssumeCache.share`)
instead of waiting for its write; a failed pipeline of one sharer leaves it (:meth:`AssumeCache.unshare`)
and the devices stay held while another sharer still writes them.

**Reservations in flight** count too (upstream's 256-entry ``reservedFor`` limit): a pod's write
pipeline registers each claim it adds the pod to (:meth:`AssumeCache.reserve`); the entry stays until
the informer shows the pod in ``reservedFor``, or shows the claim at or after the resourceVersion our
write returned (the pod was removed again meanwhile), or the pipeline fails (:meth:`unreserve`).
:meth:`reservations` is the informer's ``reservedFor`` plus those, so pods beyond the limit wait
instead of being written and rejected.

Device usage is kept incrementally in one :class:`AllocatedState` (exclusive devices reference-counted,
shared devices by share ID, consumed capacity summed), so a decision never rebuilds it. After a crash
nothing is lost: a new process lists the claims and every allocated claim counts as in use, whether or
not its pod was ever bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from draflow_runtime.dra import allocation_results as _results

from .core import AllocatedState, DeviceID

__all__ = ["AssumeCache", "Assumed"]


@dataclass
class Assumed:
    """An allocation decided but not yet seen in the informer."""

    claim_key: str  # namespace/name
    allocation: dict[str, Any]
    pod_key: str
    written: bool = False  # the status write succeeded (reservations of other pods may follow)
    # Other pods whose pipelines write the same allocation: later members of the pod-group cycle that
    # decided it (upstream: the DRA manager counts the pods sharing a pending allocation).
    sharers: set[str] = field(default_factory=set)


class AssumeCache:
    """Effective allocations per claim UID and the device usage they add up to. Not thread-safe: used
    from the event loop only, and never across an ``await`` in the middle of a decision."""

    def __init__(self) -> None:
        self.state = AllocatedState()
        self._exclusive: Counter[DeviceID] = Counter()
        self._informer: dict[str, Mapping[str, Any]] = {}  # claim uid -> allocation from the API
        self._assumed: dict[str, Assumed] = {}  # claim uid -> in-flight allocation
        self._effective: dict[str, Mapping[str, Any]] = {}
        # claim uid -> {pod uid: resourceVersion our write returned, "" while in flight}
        self._reserving: dict[str, dict[str, str]] = {}
        # claim uid -> resourceVersion of an authoritative read (settle): older informer events are stale
        self._floor: dict[str, str] = {}

    # -- reads -------------------------------------------------------------------------------------

    def allocation(self, uid: str) -> Mapping[str, Any] | None:
        """The effective allocation of a claim (assumed or from the API), or None."""
        return self._effective.get(uid)

    def assumed(self, uid: str) -> Assumed | None:
        return self._assumed.get(uid)

    def allocations(self) -> list[Mapping[str, Any]]:
        """Every claim's effective allocation (the API server's, or the one being written)."""
        return list(self._effective.values())

    def in_flight(self) -> list[Assumed]:
        return list(self._assumed.values())

    def __len__(self) -> int:
        return len(self._effective)

    # -- informer ----------------------------------------------------------------------------------

    def observe_claim(self, claim: Mapping[str, Any] | None, *, uid: str = "") -> bool:
        """Apply the informer's view of a claim (``None`` = deleted, then ``uid`` names it).

        Returns True when devices were freed (a deallocation or deletion): pods waiting for devices
        are worth retrying then.
        """
        if claim is None:
            self._informer.pop(uid, None)
            self._assumed.pop(uid, None)
            self._reserving.pop(uid, None)
            self._floor.pop(uid, None)
            return self._set_effective(uid, None)
        uid = claim["metadata"]["uid"]
        floor = self._floor.get(uid)
        if floor is not None:
            if _older(_version(claim), floor):
                return False  # the informer is behind what a read of the API server already showed
            del self._floor[uid]
        if uid in self._reserving:
            self._prune_reservations(uid, claim)
        allocation = (claim.get("status") or {}).get("allocation")
        if allocation:
            self._informer[uid] = allocation
            self._assumed.pop(uid, None)  # the write is visible: the API server's copy wins
            return self._set_effective(uid, allocation)
        self._informer.pop(uid, None)
        if uid in self._assumed:
            return False  # in flight (or a stale event): keep holding the devices
        return self._set_effective(uid, None)

    # -- decisions and writes ------------------------------------------------------------------------

    def assume(self, uid: str, claim_key: str, allocation: dict[str, Any], pod_key: str) -> None:
        """Hold the devices of ``allocation`` for claim ``uid`` until the informer shows it or
        :meth:`release` is called."""
        self._assumed[uid] = Assumed(claim_key, allocation, pod_key)
        self._set_effective(uid, allocation)

    def share(self, uid: str, pod_key: str) -> bool:
        """``pod_key``'s pipeline writes the allocation already assumed for claim ``uid`` (the same
        devices, decided earlier in the same pod-group cycle). False when nothing is assumed for it."""
        entry = self._assumed.get(uid)
        if entry is None:
            return False
        if pod_key != entry.pod_key:
            entry.sharers.add(pod_key)
        return True

    def unshare(self, uid: str, pod_key: str) -> bool:
        """``pod_key``'s pipeline gave up; True when another pod's pipeline still writes the assumed
        allocation (then the assumption stays and nothing else may be given up for this pod)."""
        entry = self._assumed.get(uid)
        if entry is None:
            return False
        entry.sharers.discard(pod_key)
        if pod_key == entry.pod_key and entry.sharers:
            entry.pod_key = entry.sharers.pop()  # the next sharer owns it now
            return True
        return pod_key != entry.pod_key

    def mark_written(self, uid: str) -> None:
        entry = self._assumed.get(uid)
        if entry is not None:
            entry.written = True

    def release(self, uid: str) -> bool:
        """Give up an assumption (its write failed or was undone); the informer's view applies again."""
        if self._assumed.pop(uid, None) is None:
            return False
        return self._set_effective(uid, self._informer.get(uid))

    def settle(self, uid: str, claim: Mapping[str, Any] | None, entry: Assumed | None) -> bool:
        """Apply an authoritative read of a claim (a GET after a write whose outcome was unknown, or
        that found the claim allocated): it replaces the informer's view until the informer catches up
        with it, and gives up ``entry`` (the failed pipeline's assumption, unless a newer pipeline
        assumed meanwhile). ``claim`` None: gone or replaced. Returns True when devices were freed."""
        if entry is not None and self._assumed.get(uid) is entry:
            del self._assumed[uid]
        if claim is None:
            self._informer.pop(uid, None)
            self._floor.pop(uid, None)
        else:
            self._floor[uid] = _version(claim)
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation:
                self._informer[uid] = allocation
            else:
                self._informer.pop(uid, None)
        if uid in self._assumed:
            return False  # a newer pipeline's allocation is being written: it stays effective
        return self._set_effective(uid, self._informer.get(uid))

    # -- reservations in flight ---------------------------------------------------------------------

    def reserve(self, claim_uid: str, pod_uid: str) -> None:
        """A pipeline is adding ``pod_uid`` to the claim's ``reservedFor``."""
        self._reserving.setdefault(claim_uid, {})[pod_uid] = ""

    def reservation_written(self, claim_uid: str, pod_uid: str, resource_version: str) -> None:
        """The write landed; the claim had ``resource_version`` right after it."""
        pods = self._reserving.get(claim_uid)
        if pods is not None and pod_uid in pods:
            pods[pod_uid] = resource_version or "?"

    def unreserve(self, claim_uid: str, pod_uid: str) -> None:
        """The pipeline failed (its reservation was undone)."""
        pods = self._reserving.get(claim_uid)
        if pods is not None:
            pods.pop(pod_uid, None)
            if not pods:
                del self._reserving[claim_uid]

    def reservations(self, claim_uid: str, reserved_for: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        """(consumers of the claim counting reservations in flight, of which in flight) for the
        informer's ``reserved_for`` of the claim."""
        pods = self._reserving.get(claim_uid)
        if not pods:
            return len(reserved_for), 0
        seen = {r.get("uid") for r in reserved_for}
        extra = sum(1 for p in pods if p not in seen)
        return len(reserved_for) + extra, extra

    def _prune_reservations(self, uid: str, claim: Mapping[str, Any]) -> None:
        seen = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []}
        version = str((claim.get("metadata") or {}).get("resourceVersion") or "")
        pods = self._reserving[uid]
        for pod_uid, written in list(pods.items()):
            if pod_uid in seen or (written and _not_older(version, written)):
                del pods[pod_uid]
        if not pods:
            del self._reserving[uid]

    # -- usage bookkeeping -----------------------------------------------------------------------------

    def _set_effective(self, uid: str, allocation: Mapping[str, Any] | None) -> bool:
        old = self._effective.get(uid)
        if old is allocation:
            return False
        if old is not None:
            self._remove(old)
        if allocation is None:
            self._effective.pop(uid, None)
        else:
            self._effective[uid] = allocation
            self._add(allocation)
        return old is not None and allocation != old

    def _add(self, allocation: Mapping[str, Any]) -> None:
        for result in _results(allocation):
            if not result.get("shareID") and not result.get("adminAccess"):
                self._exclusive[_did(result)] += 1
        self.state.add_allocation(allocation)

    def _remove(self, allocation: Mapping[str, Any]) -> None:
        state = self.state
        for result in _results(allocation):
            did = _did(result)
            share_id = result.get("shareID")
            if share_id:
                key = (did, share_id)
                if key not in state.shared:
                    continue
                state.shared.discard(key)
                state.count_capacity(did, result, -1)
                if not any(d == did for d, _ in state.shared):
                    state.capacity.pop(did, None)
            elif not result.get("adminAccess"):
                self._exclusive[did] -= 1
                if self._exclusive[did] <= 0:
                    del self._exclusive[did]
                    state.devices.discard(did)


def _not_older(seen: str, written: str) -> bool:
    """Has the informer caught up with our write? resourceVersions are etcd revisions (integers) on
    every API server we know; anything else only matches exactly."""
    try:
        return int(seen) >= int(written)
    except ValueError:
        return seen == written


def _older(seen: str, than: str) -> bool:
    """Is ``seen`` an older resourceVersion than ``than``? Only decidable for etcd revisions (integers)."""
    try:
        return int(seen) < int(than)
    except ValueError:
        return False


def _version(claim: Mapping[str, Any]) -> str:
    return str((claim.get("metadata") or {}).get("resourceVersion") or "")


def _did(result: Mapping[str, Any]) -> DeviceID:
    return DeviceID(result["driver"], result["pool"], result["device"])
