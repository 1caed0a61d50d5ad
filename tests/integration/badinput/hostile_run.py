"""Runs one :mod:`hostile` batch against the corpus's stack and checks the project rule on it.

The API server is the first filter: an object it refuses (``Invalid``) is counted and dropped. For what
it admits, after the batch is in:

- the control pod runs (``Stack.still_serving``: placed and prepared while the services chew on the
  batch; every process alive; /healthz answered within ``FROZEN`` s all along: no frozen event loop);
- then the batch's changes are made under its pods (the clean pool tainted or emptied, a class's selector
  swapped for one that fails, a template or the PodGroup deleted), and every batch pod ends Running or
  named: a PodScheduled=False condition, a Warning Event of the pod or of its PodGroup (an Event, if it
  was evicted), or a service's warning or error log line naming the pod or one of its claims;
- no device is in two claims, no shared counter over its capacity, no bound pod with a claim that is not
  allocated for its node and reserved for it (the chaos run's invariants). One exception: a claim the
  batch deleted while it was being placed may be gone under its bound pod (kube-apiserver decides a
  DELETE on the finalizers it read, so the allocator's finalizer added meanwhile does not hold it), when
  the pod was told so (ResourceClaimNotFound);
- no service logged a traceback of a Python built-in error (``KeyError``, ``TypeError``...): bad input
  must be handled, not crash a reconcile into a retry loop;
- after the batch is deleted, its pods and generated claims go away and the services still serve.
"""

from __future__ import annotations

import builtins
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from badinput_kit import Stack
from hostile import Batch

from draflow_runtime.dra import claim_names
from draflow_runtime.errors import Invalid, NotFound
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    EVENTS,
    POD_GROUPS,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from draflow_testenv.chaos.invariants import (
    Snapshot,
    bound_pods_claims,
    counters_over_capacity,
    double_allocation,
)

SERVICES = ("claim-controller", "structured-allocator", "slice-publisher", "kubelet-dra-shim",
            "reference-driver")
#: built-in exceptions that are how I/O fails, not how a service mishandles input
_TRANSPORT = (TimeoutError, ConnectionError)


@dataclass
class Outcome:
    """What one batch did: objects admitted and refused, pods that ran, and every broken rule."""

    admitted: int = 0
    refused: list[str] = field(default_factory=list)
    running: int = 0
    named: dict[str, str] = field(default_factory=dict)  # pod -> running / condition / event / log: what
    violations: list[str] = field(default_factory=list)


def unhandled(records: list[dict[str, Any]]) -> list[str]:
    """Log records that carry a traceback ending in a Python built-in error (not an API or I/O error)."""
    out = []
    for r in records:
        text = r.get("exception")
        if not isinstance(text, str) or not text.strip():
            continue
        last = text.strip().splitlines()[-1]
        name = last.split(":", 1)[0].strip()
        kind = getattr(builtins, name, None)
        if isinstance(kind, type) and issubclass(kind, Exception) and not issubclass(kind, _TRANSPORT):
            out.append(f"{r.get('event')}: {last[:300]}")
    return out


async def _create(stack: Stack, res: Any, body: dict[str, Any], out: Outcome, namespaced: bool) -> bool:
    try:
        await stack.kube.create(res, body, namespace=stack.ns if namespaced else None)
    except Invalid as exc:
        out.refused.append(f"{body['kind']} {body['metadata']['name']}: {str(exc)[:200]}")
        return False
    out.admitted += 1
    return True


async def create(stack: Stack, b: Batch, out: Outcome) -> list[str]:
    """Create the batch (refused objects dropped); returns the pods created."""
    for body in b.slices:
        await _create(stack, RESOURCE_SLICES, body, out, False)
    for body in b.classes:
        await _create(stack, DEVICE_CLASSES, body, out, False)
    for body in b.templates:
        await _create(stack, RESOURCE_CLAIM_TEMPLATES, body, out, True)
    for body in b.claims:
        await _create(stack, RESOURCE_CLAIMS, body, out, True)
    for body in b.groups:
        await _create(stack, POD_GROUPS, body, out, True)
    for body in b.elsewhere:
        with contextlib.suppress(NotFound):  # no namespace "default": nothing to confuse with
            await stack.kube.create(RESOURCE_CLAIMS, body, namespace="default")
    pods = []
    for name, claims in b.pods:
        try:
            await stack.pod(name, claims, group=b.members.get(name, ""))
        except Invalid as exc:
            out.refused.append(f"Pod {name}: {str(exc)[:200]}")
            continue
        out.admitted += 1
        pods.append(name)
    for name in b.delete_after:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(RESOURCE_CLAIMS, name, namespace=stack.ns)
    return pods


async def _named(stack: Stack, pod: str, group: str = "") -> str | None:
    """How ``pod`` is accounted for: Running, or where its trouble is named (None: nowhere yet). A member
    of PodGroup ``group`` is also named by a Warning Event of its group (a group claim that cannot be
    made is reported on the group, as upstream)."""
    listed = (await stack.kube.list(EVENTS, namespace=stack.ns)).get("items") or []
    events = [e for e in listed if e["involvedObject"].get("name") == pod]
    if group:
        events += [e for e in listed if e["involvedObject"].get("name") == group
                   and e["involvedObject"].get("kind") == "PodGroup"]
    try:
        obj = await stack.kube.get(PODS, pod, namespace=stack.ns)
    except NotFound:  # evicted (a NoExecute taint): the eviction must be told
        return next((f"gone, event {e.get('reason')}: " + e.get("message", "")[:300] for e in events
                     if e.get("reason") not in ("Scheduled", "Started", "Pulled", "Created")), None)
    status = obj.get("status") or {}
    if status.get("phase") == "Running":
        return "running"
    for c in status.get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message"):
            return "condition: " + c["message"][:300]
    for e in events:
        if e.get("type") == "Warning":
            return f"event {e.get('reason')}: " + e.get("message", "")[:300]
    words = [pod, *claim_names(obj)]
    for service in SERVICES:
        for r in stack.log_since(service):
            if r.get("level") not in ("warning", "error", "critical"):
                continue
            line = json.dumps(r)
            if any(w in line for w in words):
                return "log: " + str(r.get("event"))
    return None


KINDS = {"slice": (RESOURCE_SLICES, False), "class": (DEVICE_CLASSES, False),
         "template": (RESOURCE_CLAIM_TEMPLATES, True), "group": (POD_GROUPS, True)}


async def _delete_group(stack: Stack, name: str, *, lift: bool = True) -> None:
    """Delete a PodGroup; ``lift``: and lift the podgroup-protection finalizer, as kube-controller-manager
    (not run here) does once no pod uses the group: only at clean-up, when the batch's pods are gone."""
    with contextlib.suppress(NotFound):
        await stack.kube.delete(POD_GROUPS, name, namespace=stack.ns)
        if lift:
            await stack.kube.patch(POD_GROUPS, name, {"metadata": {"finalizers": None}}, stack.ns)


async def mutate(stack: Stack, b: Batch, out: Outcome) -> None:
    """The batch's changes under its pods (an object the API server refused or refuses the change of
    is counted as refused)."""
    for kind, name, patch in b.mutations:
        res, namespaced = KINDS[kind]
        ns = stack.ns if namespaced else None
        try:
            if patch is None and kind == "group":
                await _delete_group(stack, name, lift=False)  # its members still exist
            elif patch is None:
                await stack.kube.delete(res, name, namespace=ns)
            else:
                await stack.kube.patch(res, name, patch, ns)
        except (Invalid, NotFound) as exc:
            out.refused.append(f"change of {kind} {name}: {str(exc)[:200]}")


async def check(stack: Stack, b: Batch, pods: list[str], out: Outcome) -> None:
    await stack.still_serving()  # while the services work on the batch
    await mutate(stack, b, out)
    how: dict[str, str] = {}

    async def all_named() -> bool:
        for pod in pods:
            if how.get(pod, "log").startswith("log"):  # a log line may turn into a condition: look again
                found = await _named(stack, pod, b.members.get(pod, ""))
                if found:
                    how[pod] = found
        return all(pod in how for pod in pods)

    try:
        await stack.until(all_named, f"every pod of seed {b.seed} Running or named", within=90)
    except AssertionError:
        out.violations += [f"pod {p} neither Running nor named anywhere" for p in pods if p not in how]
    out.running = sum(1 for v in how.values() if v == "running")
    out.named = how
    listed = [(await stack.kube.list(res, namespace=ns)).get("items") or []
              for res, ns in ((PODS, stack.ns), (RESOURCE_CLAIMS, stack.ns), (RESOURCE_SLICES, None))]
    snap = Snapshot(pods=listed[0], claims=listed[1], slices=listed[2])
    rules = (double_allocation, counters_over_capacity, bound_pods_claims)
    broken = [f"{rule.__name__}: {v}" for rule in rules for v in rule(snap)]
    broken = [v for v in broken if not await _deleted_under_placement(stack, v, b, listed[1])]
    if broken:
        out.violations += broken + await _explain(stack, listed[0], listed[1], pods)
    for service in SERVICES:
        out.violations += [f"{service} {u}" for u in unhandled(stack.log_since(service))]


async def _deleted_under_placement(stack: Stack, violation: str, b: Batch,
                                   claims: list[dict[str, Any]]) -> bool:
    """A bound pod whose claim is gone is the API server's race, not the services', when the batch
    deleted that claim while it was being placed and the pod was told (ResourceClaimNotFound): a DELETE
    decides on the finalizers it read and removes the object even if the allocator added its finalizer
    meanwhile (kube-apiserver ``Store.Delete``; kube-scheduler meets the same)."""
    for name in b.delete_after:
        if f"claim {name} not allocated" not in violation:
            continue
        if any(c["metadata"]["name"] == name for c in claims):
            return False
        pod = violation.split("/", 1)[1].split(" ", 1)[0]
        return any(e.get("reason") == "ResourceClaimNotFound" and name in e.get("message", "")
                   for e in await stack.events_of(pod))
    return False


async def _explain(stack: Stack, all_pods: list[dict[str, Any]], claims: list[dict[str, Any]],
                   pods: list[str]) -> list[str]:
    """The claims and Events of the batch's bound pods, for a broken ``bound_pods_claims``."""
    by_name = {c["metadata"]["name"]: c for c in claims}
    events = (await stack.kube.list(EVENTS, namespace=stack.ns)).get("items") or []
    out = []
    for pod in all_pods:
        name = pod["metadata"]["name"]
        if not pod["spec"].get("nodeName") or name not in pods:
            continue
        for claim in claim_names(pod):
            c = by_name.get(claim) or {}
            out.append(f"  claim {claim}: metadata {c.get('metadata')} status {c.get('status')}")
        out += [f"  event of {name}: {e.get('reason')} {e.get('message')}"
                for e in events if e["involvedObject"].get("name") == name]
    return out


async def clean_up(stack: Stack, b: Batch, pods: list[str]) -> None:
    """Delete the batch; wait for its pods and their claims to be gone (the next batch gets the devices)."""
    for pod in pods:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(PODS, pod, namespace=stack.ns, grace_period_seconds=0)
    for pod in pods:
        await stack.flow.wait_gone(PODS, pod, f"pod {pod} gone")
    for body in b.groups:
        await _delete_group(stack, body["metadata"]["name"])
    for body in b.claims:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(RESOURCE_CLAIMS, body["metadata"]["name"], namespace=stack.ns)
    for body in b.elsewhere:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(RESOURCE_CLAIMS, body["metadata"]["name"], namespace="default")
    for body in b.templates:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(RESOURCE_CLAIM_TEMPLATES, body["metadata"]["name"], namespace=stack.ns)

    async def claims_gone() -> bool:
        items = (await stack.kube.list(RESOURCE_CLAIMS, namespace=stack.ns)).get("items") or []
        owners = [*pods, *(g["metadata"]["name"] for g in b.groups)]
        return not any(any(c["metadata"]["name"].startswith(p) for p in owners) for c in items) and \
            not any(c["metadata"]["name"] in {x["metadata"]["name"] for x in b.claims} for c in items)

    await stack.until(claims_gone, f"claims of seed {b.seed} gone")
    for res, bodies in ((DEVICE_CLASSES, b.classes), (RESOURCE_SLICES, b.slices)):
        for body in bodies:
            with contextlib.suppress(NotFound):
                await stack.kube.delete(res, body["metadata"]["name"])


async def run(stack: Stack, b: Batch) -> Outcome:
    """Create, check and delete one batch; the outcome lists what broke (empty ``violations``: held)."""
    out = Outcome()
    pods = await create(stack, b, out)
    try:
        await check(stack, b, pods, out)
    finally:
        await clean_up(stack, b, pods)
    stack.alive()
    return out
