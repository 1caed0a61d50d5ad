"""One pool: desired slices vs. existing slices → a plan of deletes, updates and creates; then apply it.

:func:`plan_pool` is pure (no I/O, time passed in). :func:`apply_plan` performs a plan with the API.

Slice names are deterministic (:mod:`slice_publisher.naming`): a create that raced with a stale cache
fails with AlreadyExists instead of leaving a duplicate slice behind.

Generation rules (upstream ``resourceslice`` controller):

- the pool's current generation is the highest among its existing slices; slices of a lower generation,
  slices whose name is not one of the desired names and slices beyond the desired count are obsolete;
- the new generation is the driver's hint if that is higher (every slice is rewritten), else current + 1
  if a slice is added or more than one slice changes (every slice is rewritten), else unchanged (only the
  one changed slice, if any, is written);
- ``resourceSliceCount`` is the number of desired slices;
- obsolete slices are deleted first (preconditions: uid + resourceVersion), then updates, then creates, so
  a consumer never sees two complete versions of a pool at once.

Only what differs is written (:mod:`slice_publisher.compare`: semantic equality, taint times kept).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slice_publisher.compare import fill_taint_times, slice_differs
from slice_publisher.naming import parse_slice_index, publisher_labels, slice_name
from slice_publisher.splitter import DesiredPool, split_pool

API_VERSION = "resource.k8s.io/v1"
KIND = "ResourceSlice"


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
    """The PUT body: the existing object (resourceVersion, others' labels) with our spec, labels, owner.

    Copies only what it changes (``metadata``; the old spec and status are dropped, not copied): a deep
    copy of the existing slice was a sixth of the publisher's CPU while tainting 400 pools (py-spy).
    The body shares ``desired``'s spec, built for this plan only, and nothing mutates it.
    """
    obj = {k: v for k, v in existing.items() if k not in ("spec", "status", "metadata")}
    meta = dict(existing["metadata"])
    obj["metadata"] = meta
    meta["labels"] = {**(meta.get("labels") or {}), **desired["metadata"]["labels"]}
    others = [r for r in meta.get("ownerReferences") or () if r.get("kind") != "Node"]
    refs = others + list(desired["metadata"].get("ownerReferences") or ())
    if refs:
        meta["ownerReferences"] = refs
    else:
        meta.pop("ownerReferences", None)
    obj["spec"] = desired["spec"]
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
    and ``result`` holds what was done before it. Before an AlreadyExists propagates, a slice of this
    pool under that name whose publisher labels someone changed gets them back
    (:func:`restore_labels`): else it would stay out of a label-selected informer's view and every retry
    would fail the same way.
    """
    from draflow_runtime.errors import AlreadyExists, NotFound
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
        try:
            out = await kube.create(RESOURCE_SLICES, obj, field_manager=field_manager)
        except AlreadyExists:
            restored = await restore_labels(kube, obj, field_manager=field_manager)
            if restored is not None:
                result.updated += 1
                result.written[restored["metadata"]["name"]] = restored
            raise
        result.created += 1
        result.written[out["metadata"]["name"]] = out
    return result


async def restore_labels(kube: Any, desired: Mapping[str, Any], *,
                         field_manager: str) -> dict[str, Any] | None:
    """Put the publisher labels of ``desired`` back on the live slice of that name when it is a slice of
    the same driver and pool whose labels differ (a user's ``kubectl label``); returns the slice as
    written, else None (nothing to do, or it changed meanwhile: the caller's retry looks again)."""
    from draflow_runtime.errors import Conflict, NotFound
    from draflow_runtime.kube import RESOURCE_SLICES
    from draflow_runtime.log import get_logger

    name = desired["metadata"]["name"]
    try:
        live = await kube.get(RESOURCE_SLICES, name)
    except NotFound:
        return None
    spec, want = live.get("spec") or {}, desired["spec"]
    if spec.get("driver") != want["driver"] or (spec.get("pool") or {}).get("name") != want["pool"]["name"]:
        return None  # not this pool's slice: the AlreadyExists stands
    labels = dict(live["metadata"].get("labels") or {})
    changed = sorted(k for k, v in desired["metadata"]["labels"].items() if labels.get(k) != v)
    if not changed:
        return None  # a stale cache, not an edit
    body = copy.deepcopy(live)
    body["metadata"]["labels"] = {**labels, **desired["metadata"]["labels"]}
    try:
        out: dict[str, Any] = await kube.replace(RESOURCE_SLICES, body, field_manager=field_manager)
    except (Conflict, NotFound):
        return None
    get_logger(__name__).warning("slice labels changed by someone else put back", slice=name, labels=changed)
    return out
