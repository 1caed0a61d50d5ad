"""Device taints the publisher adds on top of the driver's inventory. Pure.

Two reasons, both effect ``NoSchedule`` (no new allocation; pods already running are left alone):

- ``draflow.dev/driver-unavailable``: the driver's inventory stream broke or its registration socket went
  away. Every device of the driver gets it at once; the slices themselves go only after a grace period.
- ``draflow.dev/unhealthy``: the driver reported the device UNHEALTHY (DRAResourceHealth stream); the
  taint value is empty, the driver's message is not copied (taint values are ≤63 characters and must be
  label-like).

The overlay never removes the driver's own taints; a publisher taint replaces a driver taint with the same
key and effect. ``timeAdded`` is left empty here and filled by
:func:`slice_publisher.compare.fill_taint_times`, which keeps the time of an identical existing taint, so
a taint keeps its original time across syncs and publisher restarts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from slice_publisher.splitter import MAX_TAINTS_PER_DEVICE, DesiredPool

DRIVER_UNAVAILABLE_KEY = "draflow.dev/driver-unavailable"
UNHEALTHY_KEY = "draflow.dev/unhealthy"
EFFECT = "NoSchedule"


@dataclass(frozen=True)
class Overlay:
    """The publisher's own view of a driver: unavailable, and which (pool, device) are unhealthy."""

    driver_unavailable: bool = False
    unhealthy: frozenset[tuple[str, str]] = field(default_factory=frozenset)

    @property
    def empty(self) -> bool:
        return not self.driver_unavailable and not self.unhealthy


def overlay_taints(pool: str, device: str, overlay: Overlay) -> list[dict[str, Any]]:
    taints = []
    if overlay.driver_unavailable:
        taints.append({"key": DRIVER_UNAVAILABLE_KEY, "effect": EFFECT})
    if (pool, device) in overlay.unhealthy:
        taints.append({"key": UNHEALTHY_KEY, "effect": EFFECT})
    return taints


def _merge(own: Collection[Mapping[str, Any]], ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ours_ids = {(t["key"], t["effect"]) for t in ours}
    kept = [dict(t) for t in own if (t.get("key"), t.get("effect")) not in ours_ids]
    # Our taints go first: if the driver already used all 16 slots, safety wins over its last ones.
    return (ours + kept)[:MAX_TAINTS_PER_DEVICE]


def apply_overlay(pool: DesiredPool, overlay: Overlay) -> DesiredPool:
    """The pool with the publisher's taints added to its devices; the same object when nothing applies."""
    if overlay.empty:
        return pool
    devices = []
    for dev in pool.devices:
        ours = overlay_taints(pool.name, dev.get("name", ""), overlay)
        if ours:
            dev = {**dev, "taints": _merge(dev.get("taints") or (), ours)}
        devices.append(dev)
    return replace(pool, devices=tuple(devices))
