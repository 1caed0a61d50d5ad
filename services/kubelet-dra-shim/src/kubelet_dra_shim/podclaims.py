"""Pure decisions about a pod's claims: which claims, whether a claim may be prepared for the pod, and
which CDI devices each container sees. No I/O; table-tested in ``tests/test_podclaims.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .checkpoint import ClaimInfo

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class PodClaim:
    """One entry of ``pod.spec.resourceClaims`` resolved to a ResourceClaim name.

    ``claim_name`` is None while a template claim has no entry in ``pod.status.resourceClaimStatuses``
    yet (``waiting`` says why). ``from_template`` claims must be owned by the pod.
    """

    pod_claim_name: str
    claim_name: str | None
    from_template: bool
    waiting: str = ""


def pod_claims(pod: Mapping[str, Any]) -> list[PodClaim]:
    """The pod's claims like upstream ``resourceclaim.Name``, plus the extended-resource claim.

    A template claim whose status entry has no ``resourceClaimName`` is not needed and is left out.
    """
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = {s.get("name"): s for s in status.get("resourceClaimStatuses") or []}
    out: list[PodClaim] = []
    for ref in spec.get("resourceClaims") or []:
        name = ref.get("name", "")
        if ref.get("resourceClaimName"):
            out.append(PodClaim(name, ref["resourceClaimName"], from_template=False))
        elif ref.get("resourceClaimTemplateName"):
            entry = statuses.get(name)
            if entry is None:
                out.append(PodClaim(name, None, True, waiting="ResourceClaim not generated yet"))
            elif entry.get("resourceClaimName"):
                out.append(PodClaim(name, entry["resourceClaimName"], from_template=True))
        else:
            out.append(PodClaim(name, None, False, waiting="neither resourceClaimName nor template set"))
    extended = status.get("extendedResourceClaimStatus") or {}
    if extended.get("resourceClaimName"):
        out.append(PodClaim("", extended["resourceClaimName"], from_template=True))
    return out


def claim_drivers(claim: Mapping[str, Any]) -> list[str]:
    """Drivers named in the claim's allocation, in first-seen order."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
        "results"
    ) or []
    drivers: list[str] = []
    for r in results:
        if r.get("driver") and r["driver"] not in drivers:
            drivers.append(r["driver"])
    return drivers


def check_claim_for_pod(pod: Mapping[str, Any], claim: Mapping[str, Any], from_template: bool) -> str:
    """Why ``claim`` cannot be prepared for ``pod`` yet ("" when it can).

    Template claims must be owned (controller reference) by the pod; the claim must be allocated and
    the pod must be in ``status.reservedFor`` (the allocator reserves before binding).
    """
    pod_uid = pod["metadata"]["uid"]
    if from_template:
        owners = claim.get("metadata", {}).get("ownerReferences") or []
        if not any(o.get("uid") == pod_uid and o.get("controller") for o in owners):
            return "ResourceClaim was not created for this pod"
    status = claim.get("status") or {}
    if not status.get("allocation"):
        return "ResourceClaim is not allocated"
    if not any(r.get("uid") == pod_uid for r in status.get("reservedFor") or []):
        return "pod is not in the ResourceClaim's reservedFor"
    if not claim_drivers(claim):
        return "allocation names no driver"
    return ""


def pod_is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def _containers(pod: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    yield from spec.get("initContainers") or []
    yield from spec.get("containers") or []


def container_cdi_devices(pod: Mapping[str, Any], claims: Mapping[str, ClaimInfo]) -> dict[str, list[str]]:
    """CDI device IDs per container, like kubelet's ``GetResources``.

    ``claims`` maps pod claim names to prepared claims. A container sees the claims it lists in
    ``resources.claims``; with a ``request`` only devices allocated for that request. Containers
    that use no claim are left out.
    """
    out: dict[str, list[str]] = {}
    for container in _containers(pod):
        ids: list[str] = []
        for ref in (container.get("resources") or {}).get("claims") or []:
            info = claims.get(ref.get("name", ""))
            if info is None:
                continue
            for cdi_id in info.cdi_ids_for(ref.get("request")):
                if cdi_id not in ids:
                    ids.append(cdi_id)
        if ids:
            out[container["name"]] = ids
    return out


def allocated_resources_status(
    pod: Mapping[str, Any],
    claims: Mapping[str, ClaimInfo],
    health: Mapping[tuple[str, str, str], tuple[str, str]],
) -> dict[str, list[dict[str, Any]]]:
    """``containerStatuses[].allocatedResourcesStatus`` per container (kubelet's ResourceHealthStatus).

    ``health`` maps (driver, pool, device) to (Healthy|Unhealthy|Unknown, message). One entry per
    container claim reference, named ``claim:<claim>[/<request>]``; resourceID is the device's first
    CDI ID, else ``<driver>/<pool>/<device>``. Devices with no health report are Unknown.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for container in _containers(pod):
        entries: list[dict[str, Any]] = []
        for ref in (container.get("resources") or {}).get("claims") or []:
            info = claims.get(ref.get("name", ""))
            if info is None:
                continue
            request = ref.get("request") or ""
            resources = []
            for driver, devices in sorted(info.drivers.items()):
                for dev in devices:
                    if request and dev.request_names and request not in dev.request_names:
                        continue
                    state, message = health.get((driver, dev.pool_name, dev.device_name), ("Unknown", ""))
                    rid = (
                        dev.cdi_device_ids[0]
                        if dev.cdi_device_ids
                        else (f"{driver}/{dev.pool_name}/{dev.device_name}")
                    )
                    item: dict[str, Any] = {"resourceID": rid, "health": state}
                    if message:
                        item["message"] = message
                    resources.append(item)
            name = f"claim:{ref['name']}" + (f"/{request}" if request else "")
            entries.append({"name": name, "resources": resources})
        if entries:
            out[container["name"]] = entries
    return out
