"""Settings of the claim-controller: defaults, environment variables ``DRAFLOW_CLAIM_CONTROLLER_*``, flags."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from draflow_runtime.settings import FeatureGatesSettings, ServiceSettings

__all__ = ["Settings"]


class Settings(ServiceSettings, FeatureGatesSettings):
    """claim-controller: ResourceClaims for pods from templates through to deletion."""

    model_config = SettingsConfigDict(env_prefix="DRAFLOW_CLAIM_CONTROLLER_")

    leader_election_id: str = Field("claim-controller", description="Name of the leader-election Lease.")
    namespace: str = Field(
        "", description="Watch only this namespace (tests, benchmarks, tenants); empty watches all."
    )
    shards: int = Field(
        1, ge=1, le=1024,
        description="Lease-owned shards the pods and claims are split into. Above 1 every replica works (no "
        "--leader-elect needed): it holds some of the Leases <leader-election-id>-shard-<i> in "
        "--leader-election-namespace (lease timing as for leader election) and reconciles only their keys.",
    )
    workers: int = Field(8, ge=1, le=256, description="Concurrent reconciles (pods and claims share them).")
    reconcile_timeout: float = Field(
        30.0, gt=0, description="Seconds one reconcile may take before it is retried."
    )
    field_manager: str = Field(
        "draflow-claim-controller",
        min_length=1,
        description="Field manager of every write (server-side apply of pod.status.resourceClaimStatuses).",
    )
    create_with_finalizer: bool = Field(
        True,
        description="Create generated claims with the delete-protection finalizer "
        "(resource.kubernetes.io/delete-protection) already set, so the allocator need not add it before "
        "it allocates: one API write less per claim. kube-controller-manager creates them without it (its "
        "scheduler adds it); off: the created object is exactly kube-controller-manager's.",
    )
    mutation_cache_ttl: float = Field(
        300.0, gt=0, description="Seconds a just-written claim is remembered until the informer has it."
    )
    deleted_pods_cache_size: int = Field(
        4096, ge=1, description="UIDs of deleted pods remembered, so their reservations go without a GET."
    )
    allocator_subject: str = Field(
        "draflow.allocator.allocate",
        min_length=1,
        description="NATS request subject answered by the allocator (pods created with spec.nodeName).",
    )
    allocator_timeout: float = Field(5.0, gt=0, description="Seconds to wait for the allocator's reply.")
    allocation_recheck: float = Field(
        10.0, gt=0, description="Seconds after an accepted allocation request to look at the pod again."
    )
    device_taint_eviction: bool = Field(
        True,
        description="Delete pods using devices with NoExecute taints they do not tolerate (DRADeviceTaints), "
        "as kube-controller-manager's device-taint-eviction controller.",
    )
    device_taint_rules: bool = Field(
        True,
        description="Watch DeviceTaintRules (resource.k8s.io/v1): their NoExecute taints evict too and their "
        "status reports it (DRADeviceTaintRules); off for API servers without them.",
    )
    rule_status_period: float = Field(
        10.0, gt=0, description="Seconds between DeviceTaintRule status updates while pods are being evicted."
    )
    feature_gates: str = Field(
        "",
        description="Feature gates as kube-controller-manager's --feature-gates (Name=true|false, comma-"
        "separated; the DRA gates and GenericWorkload); unset gates keep draflow's defaults (those of its "
        "test environment). DRAWorkloadResourceClaims: claims of PodGroups (scheduling.k8s.io/v1beta1).",
    )

    @property
    def generic_workload(self) -> bool:
        """GenericWorkload: PodGroups are served and a pod may name one (``spec.schedulingGroup``); the
        PodGroup informer runs (a member pod waits for its PodGroup, as upstream)."""
        return self.gates["GenericWorkload"]

    @property
    def pod_groups(self) -> bool:
        """DRAWorkloadResourceClaims: generate, record, reserve and release the claims of PodGroups."""
        return self.gates["DRAWorkloadResourceClaims"]
