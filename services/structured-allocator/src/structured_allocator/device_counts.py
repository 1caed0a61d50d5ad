"""Free-device counts per node, kept incrementally: the decision's cheap pre-check without a recount.

Before each node's allocator search the decision asks how many devices of the node's own slices are
free (:meth:`DeviceCounts.free_devices`); a node with fewer free devices than the pod's claims need at
least is skipped. Recounting every device of every visited node cost 7 % of a decision's samples at
500 nodes half full (py-spy, ``bench/decide_mem.py``), growing as nodes fill up; here a look-up is
three dictionary reads.

The count changes in exactly two ways, and both are watched where the data changes, not at the
call sites that change it (a count that drifts from a recount would skip a node that fits):

* the slices: :class:`CountingSliceIndex` is the :class:`~.core.SliceIndex` that also counts each
  node-local slice's devices on ``upsert`` / ``remove`` (every slice and DeviceTaintRule event goes
  through those two);
* the devices in use: :func:`counting_slices` swaps the assume cache's ``AllocatedState.devices`` for a
  :class:`TrackedDevices` set that reports every device entering or leaving it (informer events,
  assumed allocations, released and settled ones all end in that set).

Same semantics as the recount it replaces: every slice of the node counts, every generation of a
pool included (an over-count is safe for skipping: it only makes the pre-check weaker), and
``shared`` is True while any slice without a ``nodeName`` exists (such slices may serve any node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, Self, cast

from .core import AllocatedState, DeviceID, SliceIndex
from .core.pools import PreparedSlice

__all__ = ["CountingSliceIndex", "DeviceCounts", "TrackedDevices", "counting_slices"]


class DeviceCounts:
    """Per node: devices of its own slices (``total``) and how many of them are in use."""

    def __init__(self) -> None:
        self._in_use: set[DeviceID] = set()  # the assume cache's set (counting_slices)
        self._total: dict[str, int] = {}
        self._used: dict[str, int] = {}
        self._nodes_of: dict[DeviceID, list[str]] = {}  # the node of each counted occurrence
        self._counted: dict[str, tuple[PreparedSlice, list[DeviceID]]] = {}  # slice name -> what it added
        self._shared_slices = 0

    def free_devices(self, node_name: str) -> tuple[int, int, bool]:
        """(free, total) devices of the node's own slices and whether shared slices exist."""
        total = self._total.get(node_name, 0)
        return total - self._used.get(node_name, 0), total, self._shared_slices > 0

    # -- slices ------------------------------------------------------------------------------------

    def slice_added(self, name: str, prepared: PreparedSlice) -> None:
        if name in self._counted:
            if self._counted[name][0] is prepared:
                return
            self.slice_removed(name)
        node = prepared.node_name
        ids = [d.id for d in prepared.devices] if node else []
        self._counted[name] = (prepared, ids)
        if not node:
            self._shared_slices += 1
            return
        self._total[node] = self._total.get(node, 0) + len(ids)
        used = 0
        for did in ids:
            self._nodes_of.setdefault(did, []).append(node)
            used += did in self._in_use
        if used:
            self._used[node] = self._used.get(node, 0) + used

    def slice_removed(self, name: str) -> None:
        entry = self._counted.pop(name, None)
        if entry is None:
            return
        prepared, ids = entry
        node = prepared.node_name
        if not node:
            self._shared_slices -= 1
            return
        _add(self._total, node, -len(ids))
        for did in ids:
            nodes = self._nodes_of[did]
            nodes.remove(node)
            if not nodes:
                del self._nodes_of[did]
            if did in self._in_use:
                _add(self._used, node, -1)

    # -- devices in use ---------------------------------------------------------------------------

    def device_used(self, did: DeviceID, delta: int) -> None:
        """``did`` entered (+1) or left (-1) the set of devices in use."""
        for node in self._nodes_of.get(did, ()):
            _add(self._used, node, delta)


def _add(counts: dict[str, int], node: str, delta: int) -> None:
    value = counts.get(node, 0) + delta
    if value:
        counts[node] = value
    else:
        counts.pop(node, None)


class CountingSliceIndex(SliceIndex):
    """A :class:`~.core.SliceIndex` that keeps :class:`DeviceCounts` current on every change."""

    def __init__(self, counts: DeviceCounts, slices: Iterable[Mapping[str, Any]] = ()) -> None:
        self.counts = counts
        super().__init__(slices)

    def upsert(self, raw: Mapping[str, Any]) -> PreparedSlice:
        prepared = super().upsert(raw)  # a replaced slice goes through remove() first
        self.counts.slice_added((raw.get("metadata") or {}).get("name", ""), prepared)
        return prepared

    add = upsert
    update = upsert

    def remove(self, name: str) -> None:
        super().remove(name)
        self.counts.slice_removed(name)


class TrackedDevices(set[DeviceID]):
    """The set of exclusively allocated devices, reporting each device that enters or leaves it.

    Every mutating method of ``set`` is overridden (the C implementations of the bulk and in-place
    ones would bypass ``add`` and ``discard``); membership tests, the allocator's hot path, stay
    the plain set's."""

    def __init__(self, counts: DeviceCounts) -> None:
        super().__init__()
        self.counts = counts

    def add(self, element: DeviceID, /) -> None:
        if element not in self:
            super().add(element)
            self.counts.device_used(element, 1)

    def discard(self, element: object, /) -> None:
        if element in self:
            super().discard(element)
            self.counts.device_used(cast(DeviceID, element), -1)

    def remove(self, element: DeviceID, /) -> None:
        if element not in self:
            raise KeyError(element)
        self.discard(element)

    def pop(self) -> DeviceID:
        element = super().pop()
        self.counts.device_used(element, -1)
        return element

    def clear(self) -> None:
        for element in list(self):
            self.discard(element)

    def update(self, *s: Iterable[DeviceID]) -> None:
        for other in s:
            for element in list(other):
                self.add(element)

    def difference_update(self, *s: Iterable[object]) -> None:
        for other in s:
            for element in list(other):
                self.discard(element)

    def intersection_update(self, *s: Iterable[object]) -> None:
        keep = set(self).intersection(*s)
        for element in [e for e in self if e not in keep]:
            self.discard(element)

    def symmetric_difference_update(self, s: Iterable[DeviceID], /) -> None:
        for element in set(s):
            if element in self:
                self.discard(element)
            else:
                self.add(element)

    def __ior__(self, value: AbstractSet[DeviceID], /) -> Self:  # type: ignore[override,misc]
        self.update(value)
        return self

    def __isub__(self, value: AbstractSet[object], /) -> Self:
        self.difference_update(value)
        return self

    def __iand__(self, value: AbstractSet[object], /) -> Self:
        self.intersection_update(value)
        return self

    def __ixor__(self, value: AbstractSet[DeviceID], /) -> Self:  # type: ignore[override,misc]
        self.symmetric_difference_update(value)
        return self


def counting_slices(allocated: AllocatedState,
                    slices: Iterable[Mapping[str, Any]] = ()) -> CountingSliceIndex:
    """A slice index whose ``counts`` follow it and ``allocated.devices`` (which keeps its members)."""
    counts = DeviceCounts()
    tracked = TrackedDevices(counts)
    counts._in_use = tracked
    tracked.update(allocated.devices)
    allocated.devices = tracked
    return CountingSliceIndex(counts, slices)
