"""Invariants of the claims the claim-controller makes for pods (from their ResourceClaimTemplates): at most
one claim per pod claim, ever (``duplicate_claims``), and, once settled, every pod has every claim it asks
for (``pods_without_claims``). Pure functions over a :class:`~draflow_testenv.chaos.invariants.Snapshot`.

These are what a claim-controller shard changing hands under load could break: a new holder that does not
find the claim the dead one created just before it died makes a second one; a shard nobody works on leaves
its new pods without claims.
"""

from __future__ import annotations

from collections import defaultdict

from draflow_runtime.dra import extended_claim_name, is_controlled_by, pod_claims, pod_group_name

from .claimkinds import POD_CLAIM_ANNOTATION, _annotations, _controller, _group_owner
from .invariants import Snapshot, _key, _live


def duplicate_claims(snap: Snapshot) -> list[str]:
    """No pod claim has two claims: claims controlled by one Pod (by UID) carry distinct
    ``resource.kubernetes.io/pod-claim-name`` annotations."""
    made: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)  # (ns, pod, uid, pod claim)
    for claim in snap.claims:
        ref = _controller(claim)
        pod_claim = _annotations(claim).get(POD_CLAIM_ANNOTATION)
        if ref is None or ref.get("kind") != "Pod" or pod_claim is None:
            continue
        key = (claim["metadata"]["namespace"], str(ref.get("name")), str(ref.get("uid")), pod_claim)
        made[key].append(claim["metadata"]["name"])
    return [f"pod {ns}/{pod} has {len(names)} claims for its claim {pod_claim!r}: {sorted(names)}"
            for (ns, pod, _uid, pod_claim), names in sorted(made.items()) if len(names) > 1]


def pods_without_claims(snap: Snapshot) -> list[str]:
    """(settled) Every live pod has every claim it asks for: a template's claim is made, recorded in the
    pod's status and exists, controlled by the pod (or, for a PodGroup member, its group's claim); a claim
    named in the pod exists; an extended-resource claim recorded for the pod exists."""
    claims = {_key(c): c for c in snap.claims}
    groups = {_key(g): g for g in snap.pod_groups}
    out = []
    for pod in snap.pods:
        if not _live(pod):
            continue
        ns = pod["metadata"]["namespace"]
        group = groups.get(f"{ns}/{pod_group_name(pod)}") if pod_group_name(pod) else None
        for pc in pod_claims(pod):
            if not pc.needed:
                continue
            if not pc.claim_name:
                out.append(f"pod {_key(pod)}: claim {pc.name!r} not made ({pc.waiting or 'no name'})")
                continue
            claim = claims.get(f"{ns}/{pc.claim_name}")
            if claim is None:
                out.append(f"pod {_key(pod)}: claim {pc.name!r} is {pc.claim_name}, which does not exist")
            elif pc.generated and not is_controlled_by(claim, pod) and not (
                    group is not None and (_group_owner(claim) or {}).get("uid") == group["metadata"]["uid"]):
                out.append(f"pod {_key(pod)}: claim {pc.name!r} is {pc.claim_name}, neither its own nor "
                           f"its PodGroup's")
        ext = extended_claim_name(pod)
        if ext and f"{ns}/{ext}" not in claims:
            out.append(f"pod {_key(pod)}: extended claim {ext} does not exist")
    return out
