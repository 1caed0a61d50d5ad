"""When two ResourceSlices are the same to the publisher, and taint times (pure).

Only what differs is written: a slice whose spec, publisher labels and Node owner reference are
semantically equal (quantities compared by value, empty fields ignored) is left alone. Taint ``timeAdded``
is kept from an identical existing taint, so re-publishing never moves it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.utils.quantity import parse_quantity

_QUANTITY_KEYS = ("default", "min", "max", "step")


def _q(value: Any) -> Any:
    return _parse_quantity(value) if isinstance(value, str) else value


@functools.lru_cache(maxsize=4096)
def _parse_quantity(value: str) -> Any:
    """A quantity string's value (the string itself if it is none); cached: a fleet repeats a few."""
    try:
        return parse_quantity(value)
    except ValueError:
        return value


def _canon_counters(counters: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: _q((v or {}).get("value")) for k, v in (counters or {}).items()}


def _canon_device(dev: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(dev)
    if dev.get("capacity"):
        cap: dict[str, Any] = {}
        for k, v in dev["capacity"].items():
            c = {"value": _q(v.get("value"))}
            pol = v.get("requestPolicy")
            if pol:
                p = {key: _q(pol.get(key)) for key in ("default",)}
                p["validValues"] = [_q(x) for x in pol.get("validValues") or ()]
                p["validRange"] = {
                    key: _q((pol.get("validRange") or {}).get(key)) for key in _QUANTITY_KEYS[1:]
                }
                c["requestPolicy"] = p
            cap[k] = c
        out["capacity"] = cap
    if dev.get("consumesCounters"):
        out["consumesCounters"] = [
            {"counterSet": u.get("counterSet"), "counters": _canon_counters(u.get("counters"))}
            for u in dev["consumesCounters"]
        ]
    return out


def _prune(value: Any) -> Any:
    """Drop None, empty lists/dicts and False-valued optional flags, recursively."""
    if isinstance(value, dict):
        pruned = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in (None, [], {}, False)}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def canonical_spec(spec: Mapping[str, Any]) -> Any:
    """A form of a ResourceSlice spec where semantically equal specs compare equal."""
    out = dict(spec)
    if spec.get("devices"):
        out["devices"] = [_canon_device(d) for d in spec["devices"]]
    if spec.get("sharedCounters"):
        out["sharedCounters"] = [
            {"name": cs.get("name"), "counters": _canon_counters(cs.get("counters"))}
            for cs in spec["sharedCounters"]
        ]
    # A DeviceAttribute {"bool": false} must survive pruning: protect it by wrapping.
    for dev in out.get("devices") or ():
        if dev.get("attributes"):
            dev["attributes"] = {k: ("attr", tuple(sorted(v.items()))) for k, v in dev["attributes"].items()}
    return _prune(out)


def _node_refs(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    return sorted(
        (r.get("name", ""), r.get("uid", ""))
        for r in meta.get("ownerReferences") or ()
        if r.get("kind") == "Node"
    )


def slice_differs(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True if writing ``desired`` over ``existing`` would change anything the publisher owns."""
    if canonical_spec(existing.get("spec") or {}) != canonical_spec(desired["spec"]):
        return True
    labels = existing["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in desired["metadata"]["labels"].items()):
        return True
    return _node_refs(existing["metadata"]) != _node_refs(desired["metadata"])


# ---------------------------------------------------------------------------------------- taints time


def _taint_id(t: Mapping[str, Any]) -> tuple[str, str, str]:
    return (t.get("key", ""), t.get("value", ""), t.get("effect", ""))


def fill_taint_times(
    contents: list[dict[str, Any]], existing: Iterable[Mapping[str, Any]], now: str
) -> list[dict[str, Any]]:
    """Copies of ``contents`` where every taint has ``timeAdded``: its own, else that of the identical
    taint (key, value, effect) on the same device in an existing slice, else ``now``."""
    times: dict[tuple[str, tuple[str, str, str]], str] = {}
    for sl in existing:
        for dev in (sl.get("spec") or {}).get("devices") or ():
            for t in dev.get("taints") or ():
                if t.get("timeAdded"):
                    times[(dev.get("name", ""), _taint_id(t))] = t["timeAdded"]
    out = []
    for content in contents:
        if not content.get("devices"):
            out.append(content)
            continue
        devices = []
        for dev in content["devices"]:
            if dev.get("taints"):
                dev = dict(dev)
                dev["taints"] = [
                    t
                    if t.get("timeAdded")
                    else {**t, "timeAdded": times.get((dev["name"], _taint_id(t)), now)}
                    for t in dev["taints"]
                ]
            devices.append(dev)
        out.append({**content, "devices": devices})
    return out
