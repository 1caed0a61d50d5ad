"""syncPodGroup: the claims of a PodGroup (DRAWorkloadResourceClaims, beta in v1.37) exist and are recorded.

A PodGroup (``scheduling.k8s.io/v1beta1``) lists ``spec.resourceClaims`` like a pod. For each entry with
a ``resourceClaimTemplateName`` the controller makes **one** claim for the whole group, as upstream's
resourceclaim controller (kube-controller-manager v1.37.1, ``syncPodGroup``) does:

- looked up by the name recorded in the PodGroup's ``status.resourceClaimStatuses`` (it must be
  controlled by this PodGroup), then by owner UID + ``resource.kubernetes.io/pod-claim-name`` annotation
  (created before a failed status write), and only then created — ``generateName`` ``<group>-<claim>-``,
  the template's labels and annotations, a controller owner reference to the PodGroup;
- recorded with a server-side apply of ``podgroups/status`` (own field manager, force) listing every
  known claim (a repeated apply changes nothing).

A member pod's claim entry of the same name and source is bound to the group
(:func:`draflow_runtime.podgroups.bind_to`): :mod:`.pods` records the group's claim in the pod status
instead of generating one, and reserves it for the PodGroup. :mod:`.claims` drops a PodGroup's
``reservedFor`` entry when the PodGroup is gone or replaced (then deallocates the claim if nobody is
left) and deletes a claim generated for a PodGroup that is gone (upstream leaves that to the garbage
collector, which draflow's test environment does not run; the same as for pods). A PodGroup being
deleted loses its protection finalizer once none of its pods is active (:mod:`.podgroup_protection`,
kube-controller-manager's podgroup-protection controller).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from draflow_runtime.dra import PodClaim, pod_group_name
from draflow_runtime.errors import ApiError, NotFound
from draflow_runtime.kube import POD_GROUPS
from draflow_runtime.log import bind
from draflow_runtime.podgroups import is_for_pod_group, pod_group_claims
from draflow_runtime.reconcile import Done

from . import metrics
from .context import Context
from .creation import create_from_template
from .naming import POD_CLAIM_NAME_ANNOTATION
from .podgroup_protection import release_when_unused

__all__ = [
    "group_claim",
    "group_claim_keys",
    "group_template_keys",
    "member_key",
    "needs_sync",
    "sync_pod_group",
]

Obj = dict[str, Any]


def member_key(pod: Mapping[str, Any]) -> list[str]:
    """Pod index: ``[<ns>/<podgroup>]`` of the PodGroup the pod belongs to."""
    group = pod_group_name(pod)
    return [f"{(pod.get('metadata') or {}).get('namespace', '')}/{group}"] if group else []


def group_claim_keys(pod_group: Mapping[str, Any]) -> Iterable[str]:
    """PodGroup index: ``<ns>/<claim>`` of every claim the group names or has recorded."""
    namespace = (pod_group.get("metadata") or {}).get("namespace", "")
    return [f"{namespace}/{pc.claim_name}" for pc in pod_group_claims(pod_group) if pc.claim_name]


def group_template_keys(pod_group: Mapping[str, Any]) -> Iterable[str]:
    """PodGroup index: ``<ns>/<template>`` of every template the group's claims come from."""
    namespace = (pod_group.get("metadata") or {}).get("namespace", "")
    templates = {pc.template_name for pc in pod_group_claims(pod_group) if pc.template_name}
    return sorted(f"{namespace}/{t}" for t in templates)


def needs_sync(ctx: Context, pod_group: Mapping[str, Any]) -> bool:
    """Whether :func:`sync_pod_group` may have something to do (upstream ``podGroupNeedsWork``): the
    PodGroup is being deleted (its protection finalizer), or a template claim of it is not recorded, or
    the recorded claim is not in the caches or not the group's. A group whose claims all exist needs no
    reconcile for a change of one of them (an allocation, a reservation)."""
    meta = pod_group.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return True
    for pc in pod_group_claims(pod_group):
        if not (pc.generated and pc.needed):
            continue
        claim = ctx.claim(meta.get("namespace", ""), pc.claim_name) if pc.claim_name else None
        if claim is None or not is_for_pod_group(claim, pod_group):
            return True
    return False


async def sync_pod_group(ctx: Context, namespace: str, name: str) -> Done:
    """Reconcile PodGroup ``namespace/name`` (see module docstring). Idempotent."""
    pod_group = ctx.pod_group(namespace, name)
    if pod_group is None:
        return Done()
    if (pod_group.get("metadata") or {}).get("deletionTimestamp"):
        with bind(podgroup=f"{namespace}/{name}"):
            await release_when_unused(ctx, pod_group)  # kube-controller-manager's podgroup-protection
        return Done()
    with bind(podgroup=f"{namespace}/{name}"):
        names: dict[str, str] = {}
        for pc in pod_group_claims(pod_group):
            if not (pc.generated and pc.needed):
                continue  # a claim by name is the user's; nothing to make
            claim = await group_claim(ctx, pod_group, pc) or await _create(ctx, pod_group, pc)
            if claim is not None:
                names[pc.name] = claim["metadata"]["name"]
        if names:
            try:
                await _record(ctx, pod_group, names)
            except NotFound:
                return Done()  # deleted meanwhile: its claims go with it
    return Done()


async def group_claim(ctx: Context, pod_group: Mapping[str, Any], pc: PodClaim) -> Obj | None:
    """The claim generated for ``pc`` of this PodGroup incarnation: by recorded name, else by owner UID
    and annotation (a claim being deleted does not count)."""
    meta = pod_group["metadata"]
    namespace = meta["namespace"]
    if pc.claim_name:
        claim = ctx.claim(namespace, pc.claim_name) or await ctx.live_claim(namespace, pc.claim_name)
        if claim is not None and is_for_pod_group(claim, pod_group):
            return claim
    for claim in ctx.claims_owned_by(meta.get("uid", "")):
        cmeta = claim.get("metadata") or {}
        if (cmeta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) == pc.name \
                and is_for_pod_group(claim, pod_group) and not cmeta.get("deletionTimestamp"):
            return claim
    return None


def _owner_ref(pod_group: Mapping[str, Any]) -> Obj:
    """The controller owner reference of a claim generated for ``pod_group``."""
    meta = pod_group["metadata"]
    # As upstream: controller only (blockOwnerDeletion would need update on podgroups/finalizers).
    return {"apiVersion": POD_GROUPS.api_version, "kind": "PodGroup", "name": meta["name"],
            "uid": meta["uid"], "controller": True}


async def _create(ctx: Context, pod_group: Obj, pc: PodClaim) -> Obj | None:
    """Create the group's claim for ``pc`` (:func:`~.creation.create_from_template`); None (after a
    Warning Event) when the template is missing: its arrival enqueues the PodGroup again."""
    return await create_from_template(
        ctx, pod_group, _owner_ref(pod_group), pc, what="PodGroup claim",
        span_attributes={"draflow.podgroup": pod_group["metadata"]["name"]})


async def _record(ctx: Context, pod_group: Obj, names: Mapping[str, str]) -> None:
    """Server-side apply ``status.resourceClaimStatuses`` of the PodGroup (no-op when recorded)."""
    recorded = {s.get("name"): s.get("resourceClaimName")
                for s in (pod_group.get("status") or {}).get("resourceClaimStatuses") or ()}
    if all(recorded.get(k) == v for k, v in names.items()):
        return
    meta = pod_group["metadata"]
    apply = {
        "apiVersion": POD_GROUPS.api_version, "kind": "PodGroup",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
        "status": {"resourceClaimStatuses": [{"name": k, "resourceClaimName": v}
                                             for k, v in sorted(names.items())]},
    }
    try:
        await ctx.kube.patch(POD_GROUPS, meta["name"], apply, meta["namespace"], patch_type="apply",
                             subresource="status", field_manager=ctx.settings.field_manager, force=True)
    except NotFound:
        raise
    except ApiError:
        metrics.ERRORS.labels(operation="podgroup-status").inc()
        raise
