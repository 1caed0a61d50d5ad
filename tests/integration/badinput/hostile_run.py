"""Runs one :mod:`hostile` batch against the corpus's stack and checks the project rule on it.

The API server is the first filter: an object it refuses (``Invalid``) is counted and dropped. For what
it admits, after the batch is in:

- the control pod runs (``Stack.still_serving``: placed and prepared while the services chew on the
  batch; every process alive; /healthz answered within ``FROZEN`` s all along: no frozen event loop);
- then the batch's changes are made under its pods (the clean pool tainted or emptied, a class's selector
  swapped for one that fails, a template deleted), and every batch pod ends Running or named: a
  PodScheduled=False condition, a Warning Event of the pod (an Event, if it was evicted), or a service's
  warning or error log line naming the pod or one of its claims;
- no device is in two claims, no shared counter over its capacity, no bound pod with a claim that is not
  allocated for its node and reserved for it (the chaos run's invariants);
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
    pods = []
    for name, claims in b.pods:
        try:
            await stack.pod(name, claims)
        except Invalid as exc:
            out.refused.append(f"Pod {name}: {str(exc)[:200]}")
            continue
        out.admitted += 1
        pods.append(name)
    for name in b.delete_after:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(RESOURCE_CLAIMS, name, namespace=stack.ns)
    return pods


async def _named(stack: Stack, pod: str) -> str | None:
    """How ``pod`` is accounted for: Running, or where its trouble is named (None: nowhere yet)."""
    events = [e for e in (await stack.kube.list(EVENTS, namespace=stack.ns)).get("items") or []
              if e["involvedObject"].get("name") == pod]
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
         "template": (RESOURCE_CLAIM_TEMPLATES, True)}


async def mutate(stack: Stack, b: Batch, out: Outcome) -> None:
    """The batch's changes under its pods (an object the API server refused or refuses the change of
    is counted as refused)."""
    for kind, name, patch in b.mutations:
        res, namespaced = KINDS[kind]
        ns = stack.ns if namespaced else None
        try:
            if patch is None:
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
                found = await _named(stack, pod)
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
    for rule in (double_allocation, counters_over_capacity, bound_pods_claims):
        out.violations += [f"{rule.__name__}: {v}" for v in rule(snap)]
    for service in SERVICES:
        out.violations += [f"{service} {u}" for u in unhandled(stack.log_since(service))]


async def clean_up(stack: Stack, b: Batch, pods: list[str]) -> None:
    """Delete the batch; wait for its pods and their claims to be gone (the next batch gets the devices)."""
    for pod in pods:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(PODS, pod, namespace=stack.ns, grace_period_seconds=0)
    for pod in pods:
        await stack.flow.wait_gone(PODS, pod, f"pod {pod} gone")
    for body in b.claims:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(RESOURCE_CLAIMS, body["metadata"]["name"], namespace=stack.ns)
    for body in b.templates:
        with contextlib.suppress(NotFound):
            await stack.kube.delete(RESOURCE_CLAIM_TEMPLATES, body["metadata"]["name"], namespace=stack.ns)

    async def claims_gone() -> bool:
        items = (await stack.kube.list(RESOURCE_CLAIMS, namespace=stack.ns)).get("items") or []
        return not any(any(c["metadata"]["name"].startswith(p) for p in pods) for c in items) and \
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
