"""Compatibility groups (DRADeviceCompatibilityGroups, alpha; upstream experimental allocator).

A device's ``consumesCounters[]`` entry may name ``compatibilityGroups``. Devices that draw from the
same counter set of a pool may be allocated together only if they are compatible:

* the first device on a counter set is always admitted;
* a device without groups is admitted only while every device on the set has none;
* a device with groups is admitted only while the set's devices all have groups and the groups
  common to all of them (their intersection) share at least one with the device's groups;
* a device drawing from several counter sets must be admitted by each of them.

The devices "on" a counter set are the already allocated ones (their groups read from the current
slices, as counters are: a :class:`Baseline` per pool, cached while the allocated state is
unchanged) plus those the running search has tentatively allocated, across all claims of the call.
An additional share of a multi-allocatable device already in use is not checked again (it does not
consume counters again either).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .pools import Pool, PreparedDevice
from .types import AllocatedState

__all__ = ["Baseline", "GroupState", "baseline", "consume"]


class GroupState(NamedTuple):
    """What the devices on one counter set have in common."""

    members: bool = False  # some device draws from the set
    ungrouped: bool = False  # ... and those devices declare no groups
    groups: frozenset[str] = frozenset()  # ... else the groups all of them declare

    def admits(self, groups: frozenset[str]) -> bool:
        if not self.members:
            return True
        if not groups:
            return self.ungrouped
        return not self.ungrouped and bool(self.groups & groups)

    def joined(self, groups: frozenset[str]) -> GroupState:
        if not self.members:
            return GroupState(True, not groups, groups)
        if self.ungrouped or not groups:
            return self
        return GroupState(True, False, self.groups & groups)


Baseline = dict[str, GroupState]  # counter set name -> state of the allocated devices


def baseline(pool: Pool, allocated: AllocatedState) -> Baseline:
    """The groups of the pool's allocated devices, per counter set."""
    out: Baseline = {}
    for s in [*pool.slices, *pool.slices_not_targeting]:
        for d in s.devices:
            if not d.consume_groups or not allocated.is_allocated(d.id):
                continue
            for set_name, groups in d.consume_groups:
                out[set_name] = out.get(set_name, GroupState()).joined(groups)
    return out


def consume(
    running: dict[str, GroupState], base: Baseline, device: PreparedDevice
) -> Callable[[], None] | None:
    """Admit ``device`` on every counter set it draws from and fold its groups into ``running``
    (seeded from ``base``): returns the undo, or None (``running`` unchanged) if it is incompatible."""
    saved: list[tuple[str, GroupState | None]] = []

    def undo() -> None:
        for set_name, previous in reversed(saved):
            if previous is None:
                running.pop(set_name, None)
            else:
                running[set_name] = previous

    for set_name, groups in device.consume_groups:
        previous = running.get(set_name)
        current = previous if previous is not None else base.get(set_name, GroupState())
        if not current.admits(groups):
            undo()
            return None
        saved.append((set_name, previous))
        running[set_name] = current.joined(groups)
    return undo
