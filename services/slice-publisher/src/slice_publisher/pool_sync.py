"""One pool: desired slices vs. existing slices → a plan of deletes, updates and creates; then apply it.

:func:`plan_pool` is pure (no I/O, time passed in). :func:`apply_plan` performs a plan with the API.

Naming (a deliberate difference from upstream's ``generateName``): slice names are deterministic,
``<owner node>-<driver>-<hash>-<index hex>`` where ``hash`` is 10 hex digits of sha256 over
(driver, pool, owner node) and ``index`` the slice's position in :func:`~slice_publisher.splitter.split_pool`.
A create that raced with a stale cache then fails with AlreadyExists instead of leaving a duplicate slice
behind (upstream needs a mutation cache and a later clean-up for that), and a human can tell from the name
which node, driver and slice it is. The owner part is shortened so the name stays within 253 characters.

Generation rules (upstream ``resourceslice`` controller):

- the pool's current generation is the highest among its existing slices; slices of a lower generation,
  slices whose name is not one of the desired names and slices beyond the desired count are obsolete;
- the new generation is the driver's hint if that is higher (every slice is rewritten), else current + 1
  if a slice is added or more than one slice changes (every slice is rewritten), else unchanged (only the
  one changed slice, if any, is written);
- ``resourceSliceCount`` is the number of desired slices;
- obsolete slices are deleted first (preconditions: uid + resourceVersion), then updates, then creates, so
  a consumer never sees two complete versions of a pool at once.

Only what differs is written: a slice whose spec, publisher labels and Node owner reference are
semantically equal (quantities compared by value, empty fields ignored) is left alone. Taint ``timeAdded``
is kept from an identical existing taint, so re-publishing never moves it.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from slice_publisher.splitter import DesiredPool, split_pool

API_VERSION = "resource.k8s.io/v1"
KIND = "ResourceSlice"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "draflow-slice-publisher"
PUBLISHER_NODE_LABEL = "draflow.dev/publisher-node"
POOL_HASH_LABEL = "draflow.dev/pool-hash"
NAME_MAX = 253
HASH_LEN = 10
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


# --------------------------------------------------------------------------------------------- naming


def _sha(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def pool_hash(driver: str, pool: str, owner_node: str) -> str:
    """Short stable id of (driver, pool, owner node); also a label value on every slice of the pool."""
    return _sha(driver, pool, owner_node)[:HASH_LEN]


def node_label_value(node: str) -> str:
    """The node name when it is a valid label value (≤63 characters), else ``h-`` + a hash of it."""
    if len(node) <= 63 and _LABEL_VALUE_RE.match(node):
        return node
    return "h-" + _sha(node)[:40]


def slice_name(driver: str, pool: str, owner_node: str, index: int) -> str:
    """Deterministic DNS-subdomain name of slice ``index`` of a pool (see the module docstring)."""
    tail = f"-{driver}-{pool_hash(driver, pool, owner_node)}-{index:x}"
    owner = owner_node[: NAME_MAX - len(tail)].rstrip("-.") or "x"
    return owner + tail


def parse_slice_index(name: str, driver: str, pool: str, owner_node: str) -> int | None:
    """The index of a slice named by :func:`slice_name` for this pool, None for any other name."""
    prefix = slice_name(driver, pool, owner_node, 0)[:-1]
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix) :]
    if not re.fullmatch(r"[0-9a-f]+", rest) or (len(rest) > 1 and rest.startswith("0")):
        return None
    return int(rest, 16)


def publisher_labels(pool: DesiredPool) -> dict[str, str]:
    return {
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
        PUBLISHER_NODE_LABEL: node_label_value(pool.owner_node),
        POOL_HASH_LABEL: pool_hash(pool.driver, pool.name, pool.owner_node),
    }


def node_owner_reference(node: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Owner reference to a Node object (garbage collection removes the slices with the node)."""
    if not node:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "name": node["metadata"]["name"],
        "uid": node["metadata"]["uid"],
        "controller": True,
    }


# --------------------------------------------------------------------------------------- semantics

_QUANTITY_KEYS = ("default", "min", "max", "step")


def _q(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return parse_quantity(value)
        except ValueError:
            return value
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


# ------------------------------------------------------------------------------------------ planning


@dataclass
class Plan:
    """What to write for one pool. ``deletes`` are existing objects; ``updates`` full objects for PUT
    (carrying the existing resourceVersion); ``creates`` full objects for POST."""

    driver: str
    pool: str
    owner_node: str
    generation: int
    slice_count: int
    device_count: int
    deletes: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    creates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.deletes or self.updates or self.creates)


def _desired_object(
    pool: DesiredPool,
    index: int,
    content: Mapping[str, Any],
    generation: int,
    count: int,
    owner_ref: Mapping[str, Any] | None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": slice_name(pool.driver, pool.name, pool.owner_node, index),
        "labels": publisher_labels(pool),
    }
    if owner_ref:
        meta["ownerReferences"] = [dict(owner_ref)]
    spec: dict[str, Any] = {
        "driver": pool.driver,
        "pool": {"name": pool.name, "generation": generation, "resourceSliceCount": count},
        **copy.deepcopy(dict(pool.placement)),
        **content,
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}


def _generation(sl: Mapping[str, Any]) -> int:
    return int(((sl.get("spec") or {}).get("pool") or {}).get("generation") or 0)


def _as_update(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The PUT body: the existing object (resourceVersion, others' labels) with our spec, labels, owner."""
    obj = copy.deepcopy(dict(existing))
    meta = obj["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), **desired["metadata"]["labels"]}
    others = [r for r in meta.get("ownerReferences") or () if r.get("kind") != "Node"]
    refs = others + list(desired["metadata"].get("ownerReferences") or ())
    if refs:
        meta["ownerReferences"] = refs
    else:
        meta.pop("ownerReferences", None)
    obj["spec"] = copy.deepcopy(desired["spec"])
    obj.pop("status", None)
    return obj


def plan_pool(
    driver: str,
    pool_name: str,
    owner_node: str,
    desired: DesiredPool | None,
    existing: Iterable[Mapping[str, Any]],
    *,
    now: str,
    owner_ref: Mapping[str, Any] | None = None,
    reserve_for_taints: bool = True,
) -> Plan:
    """The writes that turn ``existing`` (all slices of the pool) into ``desired`` (None: delete the pool).

    Pure and deterministic; raises :class:`~slice_publisher.splitter.InvalidPool` for a broken pool.
    """
    existing = sorted(existing, key=lambda s: s["metadata"]["name"])
    current_gen = max((_generation(s) for s in existing), default=0)
    if desired is None:
        return Plan(driver, pool_name, owner_node, current_gen, 0, 0, deletes=[dict(s) for s in existing])

    contents = fill_taint_times(split_pool(desired, reserve_for_taints=reserve_for_taints), existing, now)
    count = len(contents)
    by_index: dict[int, Mapping[str, Any]] = {}
    obsolete: list[Mapping[str, Any]] = []
    for sl in existing:
        idx = parse_slice_index(sl["metadata"]["name"], driver, pool_name, owner_node)
        if idx is None or idx >= count or _generation(sl) < current_gen:
            obsolete.append(sl)
        else:
            by_index[idx] = sl

    def build(gen: int) -> list[dict[str, Any]]:
        return [_desired_object(desired, i, c, gen, count, owner_ref) for i, c in enumerate(contents)]

    objs = build(current_gen)
    new = [i for i in range(count) if i not in by_index]
    changed = [i for i in by_index if slice_differs(by_index[i], objs[i])]
    generation = current_gen
    if desired.generation_hint > current_gen:
        generation = desired.generation_hint
    elif new or len(changed) > 1:
        generation = current_gen + 1
    if generation != current_gen:
        objs = build(generation)
        changed = sorted(by_index)

    plan = Plan(
        driver,
        pool_name,
        owner_node,
        generation,
        count,
        len(desired.devices),
        deletes=[dict(s) for s in obsolete],
    )
    plan.updates = [_as_update(by_index[i], objs[i]) for i in sorted(changed)]
    plan.creates = [objs[i] for i in new]
    return plan


# ------------------------------------------------------------------------------------------- applying


@dataclass
class ApplyResult:
    """What :func:`apply_plan` wrote; ``written`` maps slice name → the object the API returned (None for
    a deleted slice), so the caller can read its own writes before its informer catches up."""

    created: int = 0
    updated: int = 0
    deleted: int = 0
    written: dict[str, dict[str, Any] | None] = field(default_factory=dict)


async def apply_plan(
    kube: Any, plan: Plan, *, field_manager: str, result: ApplyResult | None = None
) -> ApplyResult:
    """Perform ``plan``: deletes (with uid + resourceVersion preconditions), then updates, then creates.

    Idempotent per step: a slice already gone counts as deleted. A precondition failure, a conflict or an
    AlreadyExists means the cache was stale; the error propagates (the caller retries from fresh state)
    and ``result`` holds what was done before it.
    """
    from draflow_runtime.errors import NotFound
    from draflow_runtime.kube import RESOURCE_SLICES

    result = result if result is not None else ApplyResult()
    for obj in plan.deletes:
        meta = obj["metadata"]
        with contextlib.suppress(NotFound):
            await kube.delete(
                RESOURCE_SLICES,
                meta["name"],
                preconditions={"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
            )
        result.deleted += 1
        result.written[meta["name"]] = None
    for obj in plan.updates:
        out = await kube.replace(RESOURCE_SLICES, obj, field_manager=field_manager)
        result.updated += 1
        result.written[out["metadata"]["name"]] = out
    for obj in plan.creates:
        out = await kube.create(RESOURCE_SLICES, obj, field_manager=field_manager)
        result.created += 1
        result.written[out["metadata"]["name"]] = out
    return result
