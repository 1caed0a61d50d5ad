"""A pod's claims for one decision, and the ``reservedFor`` entry each binds to (pure, over the caches).

Upstream PreFilter's ``podResourceClaims`` + ``podResourceClaimBindings``: every claim the pod needs must
exist, not be being deleted, and (a generated one) be controlled by the pod — or, with
DRAWorkloadResourceClaims, by the pod's PodGroup; a claim the pod's PodGroup lists with the same name
and source binds to the PodGroup (:func:`draflow_runtime.podgroups.bind_to`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from draflow_runtime.dra import is_for_pod_or_group, pod_claims, pod_group_name
from draflow_runtime.podgroups import bind_to

from .explain_http import PodExplanation
from .outcomes import Decision, Unschedulable, Waiting

__all__ = ["claims_missing", "resolve_claims"]

Obj = Mapping[str, Any]


def resolve_claims(pod: Obj, claim_of: Callable[[str], Obj | None],
                   pod_group_of: Callable[[str, str], Obj | None], pod_groups: bool
                   ) -> tuple[list[Obj], list[dict[str, str] | None]] | Decision:
    """The pod's claims and, per claim, the ``reservedFor`` entry it binds to (None: the pod), or why
    the pod cannot be tried. ``claim_of("ns/name")``, ``pod_group_of(ns, name)``: cache look-ups."""
    meta = pod["metadata"]
    ns, pod_key = meta["namespace"], f"{meta['namespace']}/{meta['name']}"
    claims: list[Obj] = []
    consumers: list[dict[str, str] | None] = []
    group = pod_group_name(pod) if pod_groups else ""
    pod_group = pod_group_of(ns, group) if group else None
    if group and pod_group is None:  # upstream: the PodGroup snapshot lookup fails, unschedulable
        return Unschedulable(PodExplanation(pod_key, [], waiting=f'PodGroup "{ns}/{group}" does not exist'))
    for pc in pod_claims(pod):
        if not pc.needed:
            continue  # its status entry names no claim: none is needed (kube-scheduler skips it)
        claim_name = pc.claim_name
        if claim_name is None:
            return Waiting(f'waiting for the ResourceClaim of pod claim "{pc.name}" to be created')
        claim = claim_of(f"{ns}/{claim_name}")
        if claim is None:
            return Waiting(f'waiting for ResourceClaim "{ns}/{claim_name}" to exist')
        cmeta = claim["metadata"]
        problem = ""
        if cmeta.get("deletionTimestamp"):
            problem = f'ResourceClaim "{ns}/{claim_name}" is being deleted'
        elif pc.generated and not is_for_pod_or_group(claim, pod, pod_groups):
            problem = f'ResourceClaim "{ns}/{claim_name}" was not created for this pod'
            if group:
                problem += f' nor for its PodGroup "{group}"'
        if problem:
            return Unschedulable(PodExplanation(pod_key, [], waiting=problem))
        claims.append(claim)
        ref = bind_to(pod, pod_group, pc) if pod_group is not None else None
        consumers.append(ref if ref is not None and ref.get("resource") == "podgroups" else None)
    return claims, consumers


def claims_missing(pod: Obj, claim_of: Callable[[str], Obj | None]) -> bool:
    """Upstream DynamicResources PreEnqueue: a claim the pod needs does not exist yet (a template claim
    without its name in the pod status, or a named claim not in the cache). Such a pod is not tried at
    all (no attempt, no span); the pod update or the claim event that ends the wait enqueues it again."""
    ns = pod["metadata"]["namespace"]
    return any(pc.needed and (pc.claim_name is None or claim_of(f"{ns}/{pc.claim_name}") is None)
               for pc in pod_claims(pod))
