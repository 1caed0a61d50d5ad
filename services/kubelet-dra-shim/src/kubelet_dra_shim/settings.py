"""Settings of kubelet-dra-shim: flags, ``DRAFLOW_KUBELET_DRA_SHIM_*`` environment variables, defaults.

Single-node mode (the default) serves ``--node-name`` with the kubelet's directory layout. Fleet mode
(``--nodes`` or ``--node-count``) serves many simulated nodes from one process, each with its own
``<fleet-root>/<node>/{plugins_registry,plugins,cdi,kubelet}`` (the reference driver's fleet layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from draflow_runtime.nodeagent import FleetSettings
from draflow_runtime.settings import FeatureGatesSettings


class ShimSettings(FleetSettings, FeatureGatesSettings):
    """kubelet-dra-shim: the kubelet's DRA manager (and optionally a simulated kubelet) for its node(s)."""

    model_config = SettingsConfigDict(env_prefix="DRAFLOW_KUBELET_DRA_SHIM_")

    http_port: int = Field(
        8082, ge=0, le=65535, description="Port of /metrics, /healthz and /readyz; 0 turns the server off."
    )
    registry_dir: str = Field(
        "/var/lib/kubelet/plugins_registry",
        description="Single-node mode: plugin registration directory (<driver>-reg.sock sockets).",
    )
    state_dir: str = Field(
        "/var/lib/draflow/kubelet-dra-shim",
        description="Single-node mode: directory of the checkpoint file dra_manager_state.",
    )
    fleet_root: str = Field(
        "/var/lib/draflow/fleet",
        description="Fleet mode: per-node plugins_registry, plugins, cdi and kubelet directories "
        "under <root>/<node>.",
    )
    boot_id_file: str = Field(
        "/proc/sys/kernel/random/boot_id",
        description="File holding the boot ID recorded beside the checkpoint (a change means a reboot).",
    )
    reprepare_after_restart: bool = Field(
        True,
        description="Prepare every checkpointed claim again once after a restart; off: only after a reboot.",
    )
    registry_poll_interval: float = Field(
        0.5, gt=0, description="Seconds between scans of the plugin registration directories."
    )
    rpc_timeout: float = Field(45.0, gt=0, description="Timeout of one NodePrepare/NodeUnprepare call.")
    workers: int = Field(
        64,
        ge=1,
        description="Pods reconciled concurrently (across all nodes); each mostly waits on the API server "
        "and a driver.",
    )
    resync_interval: float = Field(
        60.0, gt=0, description="Seconds between sweeps that unprepare claims of pods no longer active."
    )
    watch_claims: bool = Field(
        True,
        description="Watch ResourceClaims so a pod is prepared as soon as its claim is reserved for it "
        "(otherwise only retries with backoff notice it).",
    )
    allocated_nudges: bool = Field(
        True,
        description="Subscribe to draflow.events.claim.*.*.allocated on NATS so a pod whose claims were "
        "just allocated is prepared at once, even before the pods watch shows it (the watches stay the "
        "source of truth).",
    )
    simulate_kubelet: bool = Field(
        True,
        description="Also act as the node's kubelet: Node + Lease heartbeats, pod phases, deletion; "
        "turn off where a real kubelet owns the node.",
    )
    lease_renew_interval: float = Field(
        10.0, gt=0, description="Simulated kubelet: seconds between node Lease renewals."
    )
    node_status_interval: float = Field(
        60.0, gt=0, description="Simulated kubelet: seconds between Node Ready-condition updates."
    )
    node_cpu: str = Field("64", description="Simulated kubelet: the Node's cpu capacity.")
    node_memory: str = Field("256Gi", description="Simulated kubelet: the Node's memory capacity.")
    node_pods: str = Field("110", description="Simulated kubelet: the Node's pod capacity.")
    health: bool = Field(
        True,
        description="Watch DRAResourceHealth streams and write containerStatuses allocatedResourcesStatus.",
    )
    heartbeat_concurrency: int = Field(
        16, ge=1, description="Simulated kubelet: concurrent Lease/Node writes during one heartbeat round."
    )

    feature_gates: str = Field(
        "",
        description="DRA feature gates as the kubelet's --feature-gates (Name=true|false, comma-separated); "
        "unset gates keep draflow's defaults (Kubernetes 1.37's plus the alpha gates draflow's test "
        "environment turns on). DRAOptionalNodeOperations: skip the driver calls an allocation says to "
        "skip; with DRANodeAllocatableResources, simulated nodes declare both in status.declaredFeatures.",
    )

    def node_paths(self, node: str) -> NodePaths:
        if not self.fleet_mode:
            return NodePaths(Path(self.registry_dir), Path(self.state_dir), Path("/var/run/cdi"))
        root = Path(self.fleet_root) / node
        return NodePaths(root / "plugins_registry", root / "kubelet", root / "cdi")


@dataclass(frozen=True)
class NodePaths:
    registry_dir: Path
    state_dir: Path
    cdi_root: Path
