"""Prometheus metrics of the claim-controller (the runner adds queue depth, queue and reconcile latency).

Besides draflow's own counters, the two of kube-controller-manager's resourceclaim controller, under
draflow's prefix and with upstream's labels (:mod:`claim_controller.claimmetrics`):
``draflow_claim_controller_resourceclaim_creates_total{status,admin_access,owner_api_group,owner_api_kind}``
(upstream ``dynamic_resource_allocation_resourceclaim_creates_total``) and the gauge
``draflow_claim_controller_resource_claims{allocated,admin_access,source}`` (upstream
``dynamic_resource_allocation_resource_claims``), read from the leader's claim informer at scrape time.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, Counter, Histogram

from draflow_runtime.metrics import registered_collector

from .claimmetrics import ClaimsCollector

__all__ = [
    "ALLOCATION_REQUESTS",
    "CLAIMS",
    "CLAIMS_CREATED",
    "CLAIMS_DEALLOCATED",
    "CLAIMS_DELETED",
    "ERRORS",
    "EVICTION_LATENCY",
    "PODS_EVICTED",
    "RESERVATIONS_ADDED",
    "RESERVATIONS_REMOVED",
    "RESOURCECLAIM_CREATES",
    "RULE_STATUS_WRITES",
]

CLAIMS_CREATED = registered_collector(
    Counter,
    "draflow_claim_controller_claims_created",
    "ResourceClaims created from templates.",
    [],
)
RESOURCECLAIM_CREATES = registered_collector(
    Counter,
    "draflow_claim_controller_resourceclaim_creates",
    "ResourceClaim create requests by status (success, failure), admin access and owning API group and "
    "kind (Pod, or scheduling.k8s.io PodGroup), as kube-controller-manager's "
    "dynamic_resource_allocation_resourceclaim_creates_total.",
    ["status", "admin_access", "owner_api_group", "owner_api_kind"],
)
ERRORS = registered_collector(
    Counter,
    "draflow_claim_controller_errors",
    "Failed API writes and requests by operation.",
    ["operation"],
)
CLAIMS_DEALLOCATED = registered_collector(
    Counter,
    "draflow_claim_controller_claims_deallocated",
    "Claims deallocated after their last consumer.",
    [],
)
CLAIMS_DELETED = registered_collector(
    Counter,
    "draflow_claim_controller_claims_deleted",
    "Generated claims deleted because their pod finished.",
    [],
)
RESERVATIONS_REMOVED = registered_collector(
    Counter,
    "draflow_claim_controller_reservations_removed",
    "Stale reservedFor entries removed.",
    [],
)
RESERVATIONS_ADDED = registered_collector(
    Counter,
    "draflow_claim_controller_reservations_added",
    "Pods with spec.nodeName added to reservedFor.",
    [],
)
ALLOCATION_REQUESTS = registered_collector(
    Counter,
    "draflow_claim_controller_allocation_requests",
    "Allocation requests to the allocator by result (ok, refused, unavailable).",
    ["result"],
)
PODS_EVICTED = registered_collector(
    Counter,
    "draflow_claim_controller_pods_evicted",
    "Pods deleted because a device they use has a NoExecute taint they do not tolerate.",
    [],
)
RULE_STATUS_WRITES = registered_collector(
    Counter,
    "draflow_claim_controller_device_taint_rule_status_writes",
    "EvictionInProgress conditions written to DeviceTaintRule status.",
    [],
)
EVICTION_LATENCY = registered_collector(
    Histogram,
    "draflow_claim_controller_pod_eviction_latency_seconds",
    "Seconds from the time a NoExecute device taint takes effect for a pod to the pod's deletion.",
    [],
    buckets=(0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240),
)


def _claims_collector() -> ClaimsCollector:
    names = REGISTRY._names_to_collectors  # no public lookup exists (see registered_collector)
    existing = names.get(ClaimsCollector.NAME)
    if existing is not None:  # a second import of this module
        return existing  # type: ignore[return-value]
    collector = ClaimsCollector()
    REGISTRY.register(collector)
    return collector


#: ``draflow_claim_controller_resource_claims``; the running controller sets its ``source``.
CLAIMS = _claims_collector()
