"""Pure decisions about a pod's claims: which claims, whether a claim may be prepared for the pod, and
which CDI devices each container sees. No I/O; table-tested in ``tests/test_podclaims.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from draflow_runtime.dra import PodClaim, claim_results, is_for_pod_or_group, is_reserved_for_pod_or_group
from draflow_runtime.dra import pod_claims as dra_pod_claims

from .checkpoint import ClaimInfo

__all__ = [
    "PodClaim",
    "allocated_resources_status",
    "check_claim_for_pod",
    "claim_drivers",
    "container_cdi_devices",
    "pod_claims",
]


def pod_claims(pod: Mapping[str, Any]) -> list[PodClaim]:
    """The claims the shim prepares for ``pod``: every needed claim of :func:`draflow_runtime.dra.pod_claims`
    and the extended-resource claim (a template claim whose status entry names no claim is left out)."""
    return [pc for pc in dra_pod_claims(pod, extended=True) if pc.needed]


def claim_drivers(claim: Mapping[str, Any]) -> list[str]:
    """Drivers named in the claim's allocation, in first-seen order."""
    drivers: list[str] = []
    for r in claim_results(claim):
        if r.get("driver") and r["driver"] not in drivers:
            drivers.append(r["driver"])
    return drivers


def check_claim_for_pod(
    pod: Mapping[str, Any], claim: Mapping[str, Any], from_template: bool, pod_groups: bool = False
) -> str:
    """Why ``claim`` cannot be prepared for ``pod`` yet ("" when it can).

    Template claims must be owned (controller reference) by the pod; the claim must be allocated and
    the pod must be in ``status.reservedFor`` (the allocator reserves before binding). With
    ``pod_groups`` (DRAWorkloadResourceClaims, as kubelet v1.37.1) the pod's PodGroup
    (``spec.schedulingGroup.podGroupName``) may stand in for the pod in both: a claim generated for the
    group and reserved for it serves every pod of the group.
    """
    if from_template and not is_for_pod_or_group(claim, pod, pod_groups):
        return "ResourceClaim was not created for this pod" + (" or its PodGroup" if pod_groups else "")
    if not (claim.get("status") or {}).get("allocation"):
        return "ResourceClaim is not allocated"
    if not is_reserved_for_pod_or_group(claim, pod, pod_groups):
        return "pod is not in the ResourceClaim's reservedFor" + (" (nor its PodGroup)" if pod_groups else "")
    if not claim_drivers(claim):
        return "allocation names no driver"
    return ""


def _containers(pod: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    yield from spec.get("initContainers") or []
    yield from spec.get("containers") or []


def container_cdi_devices(pod: Mapping[str, Any], claims: Mapping[str, ClaimInfo]) -> dict[str, list[str]]:
    """CDI device IDs per container, like kubelet's ``GetResources``.

    ``claims`` maps pod claim names to prepared claims (``""``: the extended-resource claim). A container
    sees the claims it lists in ``resources.claims``, with a ``request`` only devices allocated for that
    request, and the requests of the extended-resource claim that ``status.extendedResourceClaimStatus``
    maps to it for an extended resource it requests. Containers that use no claim are left out.
    """
    out: dict[str, list[str]] = {}
    for container in _containers(pod):
        refs = [(claims.get(ref.get("name", "")), ref.get("request"))
                for ref in (container.get("resources") or {}).get("claims") or []]
        refs += [(claims.get(""), request) for request in _extended_requests(pod, container)]
        ids: list[str] = []
        for info, request in refs:
            for cdi_id in info.cdi_ids_for(request) if info is not None else ():
                if cdi_id not in ids:
                    ids.append(cdi_id)
        if ids:
            out[container["name"]] = ids
    return out


def _extended_requests(pod: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    """The extended-resource claim's requests mapped to ``container`` for resources it requests (kubelet
    ``GetResources``: a zero request maps nothing; a quantity is zero when its mantissa has no non-zero
    digit)."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    requested = {name for name, value in ((container.get("resources") or {}).get("requests") or {}).items()
                 if any(c in "123456789" for c in str(value).split("e")[0].split("E")[0])}
    return [m["requestName"] for m in status.get("requestMappings") or ()
            if m.get("containerName") == container.get("name") and m.get("resourceName") in requested
            and m.get("requestName")]


HEALTH_MESSAGE_MAX_LENGTH = 1024  # bytes: kube-apiserver refuses a pod status with a longer message


def truncate_health_message(message: str) -> str:
    """``message`` cut to what kube-apiserver takes, ending in ``...`` when cut (kubelet v1.37.1's
    ``truncateHealthMessage``; by UTF-8 bytes as the API server counts, never inside a character)."""
    raw = message.encode()
    if len(raw) <= HEALTH_MESSAGE_MAX_LENGTH:
        return message
    return raw[:HEALTH_MESSAGE_MAX_LENGTH - 3].decode(errors="ignore") + "..."


def allocated_resources_status(
    pod: Mapping[str, Any],
    claims: Mapping[str, ClaimInfo],
    health: Mapping[tuple[str, str, str], tuple[str, str]],
) -> dict[str, list[dict[str, Any]]]:
    """``containerStatuses[].allocatedResourcesStatus`` per container (kubelet's ResourceHealthStatus).

    ``health`` maps (driver, pool, device) to (Healthy|Unhealthy|Unknown, message). One entry per
    container claim reference, named ``claim:<claim>[/<request>]``; resourceID is the device's first
    CDI ID, else ``<driver>/<pool>/<device>``. Devices with no health report are Unknown; messages are cut
    to :data:`HEALTH_MESSAGE_MAX_LENGTH`.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for container in _containers(pod):
        entries: list[dict[str, Any]] = []
        for ref in (container.get("resources") or {}).get("claims") or []:
            info = claims.get(ref.get("name", ""))
            if info is None:
                continue
            request = ref.get("request") or ""
            base = request.split("/", 1)[0]  # devices record the base request of a subrequest
            resources = []
            for driver, devices in sorted(info.drivers.items()):
                for dev in devices:
                    if base and dev.request_names and base not in dev.request_names:
                        continue
                    state, message = health.get((driver, dev.pool_name, dev.device_name), ("Unknown", ""))
                    rid = (
                        dev.cdi_device_ids[0]
                        if dev.cdi_device_ids
                        else (f"{driver}/{dev.pool_name}/{dev.device_name}")
                    )
                    item: dict[str, Any] = {"resourceID": rid, "health": state}
                    if message:
                        item["message"] = truncate_health_message(message)
                    resources.append(item)
            name = f"claim:{ref['name']}" + (f"/{request}" if request else "")
            entries.append({"name": name, "resources": resources})
        if entries:
            out[container["name"]] = entries
    return out
