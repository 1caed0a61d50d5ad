"""What the web view needs of a ResourceSlice, worked out once per slice version (pure, memoised).

A slice's devices change only with the slice (a new ``resourceVersion``), so their row, counter sets,
group, own-taint state and sort key are computed when a version is first seen and reused by every later
build of the page; a build then only looks each device up in the claims' index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from draflow_runtime.devicetaints import is_unhealthy

__all__ = ["SHARED_ROW", "PreparedDevice", "PreparedSlice", "SliceCache", "counter_sets", "natural",
           "row_of", "taint_state"]

SHARED_ROW = "*"


def natural(name: str) -> tuple[Any, ...]:
    """``gpu-2`` before ``gpu-10``; ``gpu-1`` before ``gpu-1-part-0`` before ``gpu-2``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def row_of(spec: Mapping[str, Any], device: Mapping[str, Any]) -> str:
    """The node a device is on (its own ``nodeName``, else the slice's), or :data:`SHARED_ROW`."""
    return str(device.get("nodeName") or spec.get("nodeName") or SHARED_ROW)


def counter_sets(device: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(c.get("counterSet", "") for c in device.get("consumesCounters") or ())


def taint_state(driver: str, taints: Iterable[Mapping[str, Any]]) -> str:
    """``unhealthy``, ``tainted`` or "" (no taint)."""
    taints = list(taints)
    if any(is_unhealthy(driver, t) for t in taints):
        return "unhealthy"
    return "tainted" if taints else ""


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    name: str
    row: str
    counter_sets: frozenset[str]
    group: str  # the first counter set: a GPU and its partitions are drawn together
    own: str  # taint_state of the device's own taints
    order: tuple[Any, ...]  # natural sort key of the name
    raw: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PreparedSlice:
    name: str
    driver: str
    pool: str
    generation: int
    devices: tuple[PreparedDevice, ...]

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> PreparedSlice:
        spec = raw.get("spec") or {}
        pool = spec.get("pool") or {}
        driver = spec.get("driver", "")
        devices = tuple(
            PreparedDevice(
                name=d.get("name", ""), row=row_of(spec, d), counter_sets=(sets := counter_sets(d)),
                group=min(sets, default=""), own=taint_state(driver, d.get("taints") or ()),
                order=natural(d.get("name", "")), raw=d,
            )
            for d in spec.get("devices") or ()
        )
        return cls(str((raw.get("metadata") or {}).get("name", "")), driver, pool.get("name", ""),
                   int(pool.get("generation") or 0), devices)


class SliceCache:
    """:class:`PreparedSlice` per slice name, reused while its ``resourceVersion`` is the same (a slice
    without one is prepared every time). :meth:`retain` drops the slices no longer listed."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[str, PreparedSlice]] = {}

    def get(self, raw: Mapping[str, Any]) -> PreparedSlice:
        meta = raw.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if rv is None:
            return PreparedSlice.of(raw)
        name = str(meta.get("name", ""))
        hit = self._memo.get(name)
        if hit is not None and hit[0] == rv:
            return hit[1]
        prepared = PreparedSlice.of(raw)
        self._memo[name] = (str(rv), prepared)
        return prepared

    def retain(self, names: set[str]) -> None:
        for name in [n for n in self._memo if n not in names]:
            del self._memo[name]

    def __len__(self) -> int:
        return len(self._memo)
