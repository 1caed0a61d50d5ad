"""Extended resources backed by DRA (DRAExtendedResource), pure: upstream kube-scheduler's
``extendeddynamicresources.go`` in our own words.

A pod may ask for devices the old way, ``resources.requests``/``limits`` of an extended resource name,
when a DeviceClass maps that name: its ``spec.extendedResourceName``, or the implicit
``deviceclass.resource.kubernetes.io/<class>`` every class has (:func:`class_mapping`). The scheduler
then allocates those devices through one special ResourceClaim for the pod:

* on a node that advertises the name in ``status.allocatable`` (a device plugin) the resource is *not*
  served by DRA: node fit counts it against allocatable as any extended resource
  (:func:`served_by_dra`, upstream ``shouldDelegateResourceToDRA``);
* on any other node it is: node fit skips it, and the claim's requests (:func:`requests_and_mappings`)
  are allocated on that node together with the pod's own claims; each node may need a different claim;
* the claim (:func:`claim_body`: ``generateName: <pod>-extended-resources-``, the annotation
  ``resource.kubernetes.io/extended-resource-claim: "true"``, a controller owner reference to the pod)
  is created at binding time, then allocated and reserved like any claim, and the pod's
  ``status.extendedResourceClaimStatus`` records its name and which request serves which container's
  resource (:func:`status_patch`);
* a claim found from an earlier attempt (:func:`find_extended_claim`) is stale: it is deleted and the
  pod tried afresh (upstream's PostFilter does the same).

Request names are upstream's ``container-<i>-request-<j>``: ``i`` indexes init containers followed by
containers, ``j`` the resource among the container's sorted request names. Init containers that are
not sidecars run one at a time before the long-lived containers, so they reuse the devices of
long-lived containers that come after them and share the largest of their own extra requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .core.quantity import QuantityError, parse_quantity

__all__ = [
    "ANNOTATION",
    "DEVICE_CLASS_PREFIX",
    "EXTENDED_BY_POD",
    "IN_MEMORY_NAME",
    "ExtendedClaim",
    "ExtendedDemand",
    "claim_body",
    "class_mapping",
    "delegated_to_dra",
    "dra_demand",
    "extended_claim_owner",
    "extended_demand",
    "find_extended_claim",
    "fractional_device_count",
    "requests_and_mappings",
    "served_by_dra",
    "status_patch",
]

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
#: The claim's name until it is created (deliberately not a valid object name, as upstream).
IN_MEMORY_NAME = "<extended-resources>"

Obj = Mapping[str, Any]


def class_mapping(classes: Mapping[str, Obj]) -> dict[str, str]:
    """Extended resource name -> DeviceClass name: the implicit ``deviceclass.resource.kubernetes.io/
    <class>`` of every class, and each ``spec.extendedResourceName``. Two classes naming the same
    resource: the newer one wins, equal age the lower name (upstream's rule, for migrations)."""
    out: dict[str, str] = {}
    chosen: dict[str, tuple[str, str]] = {}  # resource -> (creationTimestamp, class)
    for name, cls in classes.items():
        out[DEVICE_CLASS_PREFIX + name] = name
        resource = (cls.get("spec") or {}).get("extendedResourceName")
        if not resource:
            continue
        created = str((cls.get("metadata") or {}).get("creationTimestamp") or "")
        held = chosen.get(resource)
        if held is None or created > held[0] or (created == held[0] and name < held[1]):
            chosen[resource] = (created, name)
    for resource, (_, name) in chosen.items():
        out[resource] = name
    return out


def dra_demand(pod_requests: Mapping[str, int], mapping: Mapping[str, str]) -> dict[str, int]:
    """The pod's requests (pod level, upstream ``PodRequests``) of names a DeviceClass maps."""
    return {name: qty for name, qty in pod_requests.items() if qty > 0 and name in mapping}


def delegated_to_dra(name: str, allocatable: Mapping[str, int]) -> bool:
    """Upstream ``shouldDelegateResourceToDRA`` for a name a DeviceClass maps: the node does not
    advertise it in allocatable (else a device plugin serves it, counted by node fit)."""
    return allocatable.get(name, 0) <= 0


def served_by_dra(demand: Mapping[str, int], allocatable: Mapping[str, int]) -> dict[str, int]:
    """The part of ``demand`` a node must serve through DRA (:func:`delegated_to_dra`)."""
    return {name: qty for name, qty in demand.items() if delegated_to_dra(name, allocatable)}


def _int_request(container: Obj, resource: str) -> int:
    raw = ((container.get("resources") or {}).get("requests") or {}).get(resource)
    if raw is None:
        return 0
    try:
        value: Fraction = parse_quantity(str(raw)).value
    except QuantityError:
        return 0
    return int(value) if value.denominator == 1 and value > 0 else 0


def fractional_device_count(pod: Obj) -> str | None:
    """Why ``pod`` asks for a device count that is not a whole number, or None. The API server accepts
    any quantity for the implicit ``deviceclass.resource.kubernetes.io/<class>`` names (to its
    validation a name under ``kubernetes.io/`` is not an extended resource, whose quantities must be
    integers), so ``500m`` gets through; no request of the special claim could serve it (upstream's
    ``createRequestsAndMappings`` skips such a container, and a claim without request mappings cannot
    be recorded in the pod status)."""
    spec = pod.get("spec") or {}
    for container in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        resources = container.get("resources") or {}
        for source in ("requests", "limits"):
            for resource, raw in (resources.get(source) or {}).items():
                if not str(resource).startswith(DEVICE_CLASS_PREFIX):
                    continue
                try:
                    whole = parse_quantity(str(raw)).value.denominator == 1
                except QuantityError:
                    whole = False
                if not whole:
                    return (f'container "{container.get("name", "")}" asks for {raw} of {resource} '
                            f"(resources.{source}): a device count must be a whole number")
    return None


def _container_request(
    index: int, container: Obj, resource: str, device_class: str, reusable: Iterable[dict[str, Any] | None]
) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """The extra device request of one container for ``resource`` (None when the reusable requests of
    later long-lived containers already cover it) and its mappings."""
    want = _int_request(container, resource)
    if want == 0:
        return None, []
    cname = container.get("name", "")
    mappings: list[dict[str, str]] = []
    covered = 0
    for req in reusable:
        if req is None:
            continue
        covered += req["exactly"]["count"]
        mappings.append({"containerName": cname, "resourceName": resource, "requestName": req["name"]})
        if covered >= want:
            return None, mappings
    names = sorted((container.get("resources") or {}).get("requests") or {})
    name = f"container-{index}-request-{names.index(resource)}"
    request = {"name": name, "exactly": {"deviceClassName": device_class,
                                         "allocationMode": "ExactCount", "count": want - covered}}
    mappings.append({"containerName": cname, "resourceName": resource, "requestName": name})
    return request, mappings


def requests_and_mappings(pod: Obj, resources: Iterable[str], mapping: Mapping[str, str]
                          ) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Device requests of the special claim for ``resources`` (served by DRA on the node) and the
    ``requestMappings`` of ``pod.status.extendedResourceClaimStatus`` (upstream
    ``createRequestsAndMappings``): requests sorted by name, mappings of long-lived containers first."""
    spec = pod.get("spec") or {}
    inits = list(spec.get("initContainers") or [])
    containers = [*inits, *(spec.get("containers") or [])]
    short_lived = [i for i, c in enumerate(containers)
                   if i < len(inits) and c.get("restartPolicy") != "Always"]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(resources):
        device_class = mapping.get(resource)
        if device_class is None:
            continue
        long_requests: list[dict[str, Any] | None] = [None] * len(containers)
        long_mappings: list[dict[str, str]] = []
        for i in long_lived:
            req, maps = _container_request(i, containers[i], resource, device_class, ())
            long_requests[i] = req
            long_mappings += maps
        largest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_mappings: list[dict[str, str]] = []
        for i in short_lived:
            req, maps = _container_request(i, containers[i], resource, device_class, long_requests[i:])
            if req is not None:
                short_names.add(req["name"])
                if largest is None or largest["exactly"]["count"] < req["exactly"]["count"]:
                    largest = req
            short_mappings += maps
        if largest is not None:
            # Init containers run one at a time: all of them share the largest request.
            for m in short_mappings:
                if m["requestName"] in short_names:
                    m["requestName"] = largest["name"]
            requests.append(largest)
        requests += [r for r in long_requests if r is not None]
        mappings += long_mappings + short_mappings
    requests.sort(key=lambda r: r["name"])
    return requests, mappings


def claim_body(pod: Obj, requests: list[dict[str, Any]], *, name: str = "", uid: str = "") -> dict[str, Any]:
    """The special claim for ``pod``. Without ``name``/``uid``: the body to create (the API server
    generates the name from ``<pod>-extended-resources-``); with them: the in-memory stand-in the
    allocator searches with."""
    meta = pod["metadata"]
    metadata: dict[str, Any] = {
        "namespace": meta["namespace"],
        "generateName": f"{meta['name']}-extended-resources-",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"],
                             "controller": True}],
        "annotations": {ANNOTATION: "true"},
    }
    if name:
        metadata["name"] = name
    if uid:
        metadata["uid"] = uid
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": metadata,
            "spec": {"devices": {"requests": requests}}}


#: Index of the claims informer: pod UID -> its special claims (:func:`extended_claim_owner`).
EXTENDED_BY_POD = "extendedByPod"


def extended_claim_owner(claim: Obj) -> list[str]:
    """Index function: ``[pod uid]`` for a special claim (annotation + controller pod), else ``[]``."""
    cmeta = claim.get("metadata") or {}
    if (cmeta.get("annotations") or {}).get(ANNOTATION) != "true":
        return []
    return [str(ref.get("uid")) for ref in cmeta.get("ownerReferences") or ()
            if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("uid")]


def find_extended_claim(pod: Obj, claims: Iterable[Obj]) -> Obj | None:
    """The special claim made for this pod incarnation (annotation + controller owner), or None."""
    meta = pod["metadata"]
    for claim in claims:
        cmeta = claim.get("metadata") or {}
        if (cmeta.get("annotations") or {}).get(ANNOTATION) != "true":
            continue
        for ref in cmeta.get("ownerReferences") or ():
            if ref.get("controller") and ref.get("uid") == meta.get("uid") \
                    and ref.get("name") == meta["name"]:
                return claim
    return None


def status_patch(pod: Obj, claim_name: str, mappings: list[dict[str, str]]) -> dict[str, Any]:
    """Merge patch of ``pods/status`` recording the claim (the pod's UID is a precondition)."""
    return {"metadata": {"uid": pod["metadata"]["uid"]},
            "status": {"extendedResourceClaimStatus": {"requestMappings": mappings,
                                                       "resourceClaimName": claim_name}}}


@dataclass
class ExtendedClaim:
    """The special claim for the pod's extended resources served by DRA on the chosen node
    (:mod:`.extres`): the in-memory stand-in (temporary name and uid), its allocation and the
    ``requestMappings`` for ``pod.status.extendedResourceClaimStatus``."""

    claim: dict[str, Any]
    mappings: list[dict[str, str]]
    allocation: dict[str, Any] | None = None


class ExtendedDemand:
    """One decision's view of the pod's DRA-backed extended resources: the special claim each node
    needs (names the node advertises are a device plugin's, :func:`served_by_dra`), built once
    per distinct set of names. ``stale``: a special claim from an earlier attempt."""

    def __init__(self, pod: Mapping[str, Any], mapping: dict[str, str], demand: dict[str, int],
                 stale: Mapping[str, Any] | None) -> None:
        self.pod, self.mapping, self.demand, self.stale = pod, mapping, demand, stale
        self._by_names: dict[frozenset[str], ExtendedClaim] = {}
        self._uid = f"extended-{uuid.uuid4()}"  # stands in for the claim's uid until it is created

    def for_node(self, node: Mapping[str, Any], allocatable: Mapping[str, int]) -> ExtendedClaim | None:
        names = frozenset(served_by_dra(self.demand, allocatable))
        if not names:
            return None
        ext = self._by_names.get(names)
        if ext is None:
            requests, mappings = requests_and_mappings(self.pod, names, self.mapping)
            claim = claim_body(self.pod, requests, name=IN_MEMORY_NAME, uid=self._uid)
            ext = self._by_names[names] = ExtendedClaim(claim, mappings)
        return ext


def extended_demand(pod: Obj, pod_requests: Mapping[str, int], classes: Mapping[str, Obj],
                    by_index: Callable[[str, str], list[dict[str, Any]]]) -> ExtendedDemand | None:
    """The pod's demand of extended resources a DeviceClass maps, or None. ``by_index``: the claims
    informer's look-up (index :data:`EXTENDED_BY_POD`), to find a special claim of an earlier attempt."""
    mapping = class_mapping(classes)
    demand = dra_demand(pod_requests, mapping)
    if not demand:
        return None
    stale = find_extended_claim(pod, by_index(EXTENDED_BY_POD, str(pod["metadata"].get("uid"))))
    return ExtendedDemand(pod, mapping, demand, stale)
