"""Builders for resource.k8s.io/v1 objects as the API server serves them (plain dicts)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

DRIVER = "gpu.example.com"
NODE_NAME = "node-1"
NODE = {"metadata": {"name": NODE_NAME, "labels": {"zone": "a", "rack": "r1"}}}
FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PIN_NODE1 = {
    "nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE_NAME]}]}
    ]
}


def _attr(v: Any) -> dict[str, Any]:
    if isinstance(v, tuple) and v[0] == "version":
        return {"version": v[1]}
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    return {"string": v}


def dev(
    name: str, attrs: dict[str, Any] | None = None, cap: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if attrs:
        d["attributes"] = {k: _attr(v) for k, v in attrs.items()}
    if cap:
        d["capacity"] = {k: (v if isinstance(v, dict) else {"value": v}) for k, v in cap.items()}
    d.update(extra)
    return d


def rslice(
    name: str,
    devices: list[dict[str, Any]],
    *,
    node: str | None = NODE_NAME,
    pool: str | None = None,
    gen: int = 1,
    count: int = 1,
    driver: str = DRIVER,
    rv: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node or "shared", "generation": gen, "resourceSliceCount": count},
    }
    if node and not ({"allNodes", "nodeSelector", "perDeviceNodeSelection"} & spec.keys()):
        s["nodeName"] = node
    if devices:
        s["devices"] = devices
    s.update(spec)
    meta: dict[str, Any] = {"name": name}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta, "spec": s}


def dclass(name: str, *exprs: str, config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
    if config:
        spec["config"] = config
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def req(
    name: str,
    cls: str = "gpu",
    *,
    count: int | None = None,
    mode: str | None = None,
    selectors: tuple[str, ...] = (),
    admin: bool | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    capacity: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {"name": name, "exactly": _exact(cls, count, mode, selectors, admin, tolerations, capacity)}


def sub(name: str, cls: str = "gpu", **kw: Any) -> dict[str, Any]:
    return {
        "name": name,
        **_exact(
            cls,
            kw.get("count"),
            kw.get("mode"),
            kw.get("selectors", ()),
            None,
            kw.get("tolerations"),
            kw.get("capacity"),
        ),
    }


def _exact(cls, count, mode, selectors, admin, tolerations, capacity) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    e: dict[str, Any] = {"deviceClassName": cls}
    if selectors:
        e["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if mode:
        e["allocationMode"] = mode
    if count is not None:
        e["count"] = count
    if admin is not None:
        e["adminAccess"] = admin
    if tolerations:
        e["tolerations"] = tolerations
    if capacity:
        e["capacity"] = {"requests": capacity}
    return e


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(
    name: str,
    *requests: dict[str, Any],
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
    allocation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    c: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": devices},
    }
    if allocation:
        c["status"] = {"allocation": allocation}
    return c


def res(
    request: str, device: str, *, pool: str = NODE_NAME, driver: str = DRIVER, **extra: Any
) -> dict[str, Any]:
    return {"request": request, "driver": driver, "pool": pool, "device": device, **extra}


def alloc(
    *results: dict[str, Any],
    node_selector: dict[str, Any] | None = PIN_NODE1,
    config: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    devices: dict[str, Any] = {"results": list(results)}
    if config:
        devices["config"] = config
    a: dict[str, Any] = {"devices": devices}
    if node_selector is not None:
        a["nodeSelector"] = node_selector
    a.update(extra)
    return a


def share_ids():  # type: ignore[no-untyped-def]
    n = 0

    def gen() -> str:
        nonlocal n
        n += 1
        return str(uuid.UUID(int=n))

    return gen


def share(n: int) -> str:
    return str(uuid.UUID(int=n))
