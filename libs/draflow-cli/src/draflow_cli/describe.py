"""``draflow describe node <name>``: the DRA view ``kubectl describe node`` lacks.

From the API server only: the ResourceSlices of the node (``spec.nodeName`` or a device's
``nodeName``), their pools (the newest generation counts, as for the allocator; older slices are
listed but their devices are not), every device with its taints and the claim it is allocated to, the
claims allocated on the node (node selector of the allocation, or a device of the node in the
results) and the pods using each claim. The pure part is :func:`node_view`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from draflow_runtime.dra import allocation_node, claim_results
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import NODES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, KubeClient

from .explain import pods_of
from .kubeopts import dump, structured
from .table import render


def _pool(spec: Mapping[str, Any]) -> tuple[str, str, int]:
    pool = spec.get("pool") or {}
    return spec.get("driver", ""), pool.get("name", ""), int(pool.get("generation", 0))


def _on_node(spec: Mapping[str, Any], node: str) -> bool:
    return spec.get("nodeName") == node or any(d.get("nodeName") == node for d in spec.get("devices") or ())


def taint_text(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as kubectl prints node taints."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def _ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def node_view(
    node: str, node_obj: Mapping[str, Any] | None, slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]], pods: list[Mapping[str, Any]],
) -> dict[str, Any]:
    """The document behind the table and ``-o json|yaml``."""
    mine = sorted((s for s in slices if _on_node(s.get("spec") or {}, node)),
                  key=lambda s: (_pool(s.get("spec") or {}), (s.get("metadata") or {}).get("name", "")))
    newest: dict[tuple[str, str], int] = {}
    for s in mine:
        driver, pool, generation = _pool(s.get("spec") or {})
        newest[(driver, pool)] = max(newest.get((driver, pool), 0), generation)
    claims = list(claims)
    owner: dict[tuple[str, str, str], str] = {}
    for c in claims:
        for r in claim_results(c):
            owner[(r.get("driver", ""), r.get("pool", ""), r.get("device", ""))] = _ref(c)
    slice_rows: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    pools: dict[tuple[str, str], dict[str, Any]] = {}
    for s in mine:
        spec = s.get("spec") or {}
        driver, pool, generation = _pool(spec)
        current = generation >= newest[(driver, pool)]
        slice_rows.append({"name": (s.get("metadata") or {}).get("name", ""), "driver": driver, "pool": pool,
                           "generation": generation, "devices": len(spec.get("devices") or ()),
                           "current": current})
        if not current:
            continue
        entry = pools.setdefault((driver, pool), {
            "driver": driver, "pool": pool, "generation": generation, "slices": 0,
            "resourceSliceCount": int((spec.get("pool") or {}).get("resourceSliceCount", 0)), "devices": 0,
        })
        entry["slices"] += 1
        for d in spec.get("devices") or ():
            if d.get("nodeName") not in (None, node):
                continue
            entry["devices"] += 1
            name = d.get("name", "")
            devices.append({"driver": driver, "pool": pool, "device": name,
                            "taints": [taint_text(t) for t in d.get("taints") or ()],
                            "claim": owner.get((driver, pool, name), "")})
    ours = {(d["driver"], d["pool"], d["device"]) for d in devices}
    on_node = []
    for c in sorted(claims, key=_ref):
        results = claim_results(c)
        if allocation_node(c) != node and not any(
            (r.get("driver", ""), r.get("pool", ""), r.get("device", "")) in ours for r in results
        ):
            continue
        on_node.append({
            "claim": _ref(c),
            "devices": [f"{r.get('driver', '')}/{r.get('pool', '')}/{r.get('device', '')}" for r in results],
            "pods": sorted(_ref(p) for p in pods_of(c, pods)),
        })
    return {"node": node, "nodeObject": node_obj is not None, "slices": slice_rows,
            "pools": [pools[k] for k in sorted(pools)], "devices": devices, "claims": on_node}


def format_node(view: Mapping[str, Any]) -> str:
    node = view["node"]
    lines = [f"Node: {node}" + ("" if view["nodeObject"] else " (no Node object)")]
    sections: list[tuple[str, list[str], list[list[object]]]] = [
        ("ResourceSlices", ["NAME", "DRIVER", "POOL", "GENERATION", "DEVICES", "CURRENT"],
         [[s["name"], s["driver"], s["pool"], s["generation"], s["devices"], "yes" if s["current"] else "no"]
          for s in view["slices"]]),
        ("Pools", ["DRIVER", "POOL", "GENERATION", "SLICES", "DEVICES"],
         [[p["driver"], p["pool"], p["generation"], f"{p['slices']}/{p['resourceSliceCount']}", p["devices"]]
          for p in view["pools"]]),
        ("Devices", ["DRIVER", "POOL", "DEVICE", "TAINTS", "CLAIM"],
         [[d["driver"], d["pool"], d["device"], ",".join(d["taints"]) or "-", d["claim"] or "-"]
          for d in view["devices"]]),
        ("Allocated claims", ["CLAIM", "DEVICES", "PODS"],
         [[c["claim"], ",".join(c["devices"]), ",".join(c["pods"]) or "-"] for c in view["claims"]]),
    ]
    for title, headers, rows in sections:
        lines.append("")
        lines.append(f"{title} ({len(rows)}):")
        lines.append(render(headers, rows) if rows else "  <none>")
    return "\n".join(lines)


async def node(kube: KubeClient, name: str, output: str = "table") -> str:
    try:
        node_obj: Mapping[str, Any] | None = await kube.get(NODES, name)
    except NotFound:
        node_obj = None
    slices = (await kube.list(RESOURCE_SLICES)).get("items") or []
    claims = (await kube.list(RESOURCE_CLAIMS)).get("items") or []
    pods = (await kube.list(PODS)).get("items") or []
    view = node_view(name, node_obj, slices, claims, pods)
    if node_obj is None and not view["slices"] and not view["claims"]:
        raise LookupError(f"node {name!r}: no Node, no ResourceSlices and no claims allocated on it")
    return dump(view, output) if structured(output) else format_node(view)
