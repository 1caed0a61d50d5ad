"""Prometheus collectors of the slice publisher (shared by the pool reconcile and the start-up clean-up)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from draflow_runtime.metrics import registered_collector

SLICES_CREATED: Counter = registered_collector(
    Counter, "draflow_slice_publisher_slices_created_total", "ResourceSlices created.", ["driver"]
)
SLICES_UPDATED: Counter = registered_collector(
    Counter, "draflow_slice_publisher_slices_updated_total", "ResourceSlices updated.", ["driver"]
)
SLICES_DELETED: Counter = registered_collector(
    Counter, "draflow_slice_publisher_slices_deleted_total", "ResourceSlices deleted.", ["driver"]
)
SYNC_SECONDS: Histogram = registered_collector(
    Histogram,
    "draflow_slice_publisher_pool_sync_seconds",
    "Duration of one pool sync (plan + writes).",
    ["driver"],
)
