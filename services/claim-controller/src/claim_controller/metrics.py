"""Prometheus metrics of the claim-controller (the runner adds queue depth, queue and reconcile latency)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from draflow_runtime.metrics import registered_collector

__all__ = [
    "ALLOCATION_REQUESTS",
    "CLAIMS_CREATED",
    "CLAIMS_DEALLOCATED",
    "CLAIMS_DELETED",
    "ERRORS",
    "EVICTION_LATENCY",
    "PODS_EVICTED",
    "RESERVATIONS_ADDED",
    "RESERVATIONS_REMOVED",
    "RULE_STATUS_WRITES",
]

CLAIMS_CREATED = registered_collector(
    Counter,
    "draflow_claim_controller_claims_created",
    "ResourceClaims created from templates.",
    [],
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
