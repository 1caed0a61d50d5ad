"""Settings of the structured-allocator: defaults, environment variables
``DRAFLOW_STRUCTURED_ALLOCATOR_*`` and flags (flag > environment > default)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from draflow_runtime.settings import FeatureGatesSettings, ServiceSettings

from . import featuregates
from .core import Features

__all__ = ["Settings"]


class Settings(ServiceSettings, FeatureGatesSettings):
    """structured-allocator: devices for claims and a node for the pod (a secondary scheduler)."""

    model_config = SettingsConfigDict(env_prefix="DRAFLOW_STRUCTURED_ALLOCATOR_")

    leader_election_id: str = Field(
        "structured-allocator", description="Name of the leader-election Lease."
    )
    scheduler_names: str = Field(
        "draflow",
        min_length=1,
        description="Comma-separated spec.schedulerName values of the pods this allocator schedules.",
    )
    field_manager: str = Field(
        "draflow-structured-allocator", min_length=1, description="Field manager of every API write."
    )
    write_concurrency: int = Field(
        32, ge=1, le=1024,
        description="API write pipelines (claim status, reservedFor, binding) in flight at once.",
    )
    nodes_to_find: int = Field(
        32, ge=1,
        description="Stop looking after this many feasible nodes and score among them (0 < n; bounds "
        "the decision time like kube-scheduler's percentageOfNodesToScore); when scores are known before "
        "the device search, this many candidate nodes are ranked and searched best first.",
    )
    scorer: Literal["pack", "spread"] = Field(
        "pack", description="Node scorer: pack (fewest free devices left) or spread (most left)."
    )
    unschedulable_retry: float = Field(
        60.0, gt=0, description="Seconds after which an unschedulable pod is tried again without any event."
    )
    write_retry_base: float = Field(
        0.05, gt=0, description="First backoff (seconds) after a failed write pipeline; doubles per failure."
    )
    allocate_subject: str = Field(
        "draflow.allocator.allocate",
        min_length=1,
        description="NATS request subject answered for pods created with spec.nodeName already set.",
    )
    pool_events_subject: str = Field(
        "draflow.events.pool.>",
        description="NATS subject of slice-publisher pool changes (nudges a retry of unschedulable pods).",
    )
    device_taint_rules: bool = Field(
        True,
        description="Watch DeviceTaintRules (resource.k8s.io/v1) and add their taints to the devices they "
        "select; turn off for API servers that do not serve them.",
    )
    binding_timeout: float = Field(
        600.0, gt=0,
        description="Seconds after allocationTimestamp that a pod waits for the binding conditions of its "
        "devices before the allocation is given up (upstream bindingTimeout).",
    )
    binding_poll_interval: float = Field(
        5.0, gt=0,
        description="Seconds between re-checks of binding conditions in the claim cache (a claim update "
        "also wakes the waiting pipeline).",
    )
    filter_timeout: float = Field(
        10.0, ge=0,
        description="Seconds one pod's decision may search for devices over all nodes (upstream "
        "DRASchedulerFilterTimeout); then the pod is unschedulable with 'search budget exhausted' and "
        "retried with backoff. 0: no limit.",
    )
    search_steps: int = Field(
        25_000, ge=0,
        description="Device tries one node's search may make (each candidate device considered for a "
        "slot is a step; 25,000 take about 100 ms on a slow core); bounds how long a decision holds the "
        "event loop. A node that needs more counts as 'search budget exhausted after N steps'. 0: no "
        "limit.",
    )
    explanations_kept: int = Field(
        2048, ge=1, description="Explanations of unallocatable claims kept for GET /explain."
    )
    ui_jaeger_url: str = Field(
        "",
        description="Base URL of the Jaeger UI the web view (GET /ui) links each claim's trace to "
        "(<url>/trace/<traceID>); empty: the trace ID is shown without a link.",
    )

    feature_gates: str = Field(
        "",
        description="DRA feature gates as kube-scheduler's --feature-gates (Name=true|false, comma-"
        "separated); unset gates keep draflow's defaults: Kubernetes 1.37's, plus the alpha gates "
        "DRAListTypeAttributes, DRADeviceCompatibilityGroups, DRADerivedAttributes, DRAResourcePoolStatus, "
        "DRAPartitionableDevicesType, DRAOptionalNodeOperations, DRANodeAllocatableResources and the "
        "beta DRAWorkloadResourceClaims with GenericWorkload that draflow's test environment turns on. "
        "Set them as the kube-apiserver has them.",
    )

    @property
    def allocator_features(self) -> Features:
        return featuregates.allocator_features(self.gates)

    @property
    def effective_filter_timeout(self) -> float:
        """``filter_timeout``, or 0 (no limit) with DRASchedulerFilterTimeout off, as upstream."""
        return self.filter_timeout if self.gates["DRASchedulerFilterTimeout"] else 0.0

    @property
    def watch_device_taint_rules(self) -> bool:
        """``device_taint_rules`` and the DRADeviceTaintRules gate."""
        return self.device_taint_rules and self.gates["DRADeviceTaintRules"]

    @field_validator("scheduler_names")
    @classmethod
    def _names(cls, value: str) -> str:
        names = [n.strip() for n in value.split(",") if n.strip()]
        if not names:
            raise ValueError("at least one scheduler name is needed")
        return ",".join(names)

    @property
    def scheduler_name_set(self) -> frozenset[str]:
        return frozenset(self.scheduler_names.split(","))
