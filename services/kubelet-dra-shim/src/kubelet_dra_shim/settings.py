"""Settings of kubelet-dra-shim: flags, ``DRAFLOW_KUBELET_DRA_SHIM_*`` environment variables, defaults.

Single-node mode (the default) serves ``--node-name`` with the kubelet's directory layout. Fleet mode
(``--nodes`` or ``--node-count``) serves many simulated nodes from one process, each with its own
``<fleet-root>/<node>/{plugins_registry,plugins,cdi,kubelet}`` (the reference driver's fleet layout).
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from draflow_runtime.settings import DEFAULT_DOC_KEY, ServiceSettings

_RANGE = re.compile(r"^(?P<prefix>.*?)(?P<start>\d+)\.\.(?P=prefix)(?P<end>\d+)$")


def _default_node_name() -> str:
    return os.environ.get("NODE_NAME") or socket.gethostname()


class ShimSettings(ServiceSettings):
    """kubelet-dra-shim: the kubelet's DRA manager (and optionally a simulated kubelet) for its node(s)."""

    model_config = SettingsConfigDict(env_prefix="DRAFLOW_KUBELET_DRA_SHIM_")

    http_port: int = Field(
        8082, ge=0, le=65535, description="Port of /metrics, /healthz and /readyz; 0 turns the server off."
    )
    node_name: str = Field(
        default_factory=_default_node_name,
        description="Node served in single-node mode.",
        json_schema_extra={DEFAULT_DOC_KEY: "$NODE_NAME, else the hostname"},
    )
    registry_dir: str = Field(
        "/var/lib/kubelet/plugins_registry",
        description="Single-node mode: plugin registration directory (<driver>-reg.sock sockets).",
    )
    state_dir: str = Field(
        "/var/lib/draflow/kubelet-dra-shim",
        description="Single-node mode: directory of the checkpoint file dra_manager_state.",
    )
    nodes: str = Field(
        "", description="Fleet mode: nodes to serve, comma separated; 'node-0..node-199' expands a range."
    )
    node_name_prefix: str = Field("sim-", description="Fleet mode with --node-count: node name prefix.")
    node_count: int = Field(0, ge=0, description="Fleet mode: serve <prefix>0 .. <prefix><count-1>.")
    fleet_root: str = Field(
        "/var/lib/draflow/fleet",
        description="Fleet mode: per-node plugins_registry, plugins, cdi and kubelet directories "
        "under <root>/<node>.",
    )
    boot_id_file: str = Field(
        "/proc/sys/kernel/random/boot_id",
        description="File holding the boot ID recorded in the checkpoint (a change means a reboot).",
    )
    reprepare_after_restart: bool = Field(
        True,
        description="Prepare every checkpointed claim again once after a restart; off: only after a reboot.",
    )
    registry_poll_interval: float = Field(
        0.5, gt=0, description="Seconds between scans of the plugin registration directories."
    )
    rpc_timeout: float = Field(45.0, gt=0, description="Timeout of one NodePrepare/NodeUnprepare call.")
    workers: int = Field(8, ge=1, description="Pods reconciled concurrently (across all nodes).")
    resync_interval: float = Field(
        60.0, gt=0, description="Seconds between sweeps that unprepare claims of pods no longer active."
    )
    watch_claims: bool = Field(
        True,
        description="Watch ResourceClaims so a pod is prepared as soon as its claim is reserved for it "
        "(otherwise only retries with backoff notice it).",
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

    @model_validator(mode="after")
    def _check_fleet(self) -> ShimSettings:
        if self.nodes and self.node_count:
            raise ValueError("set either nodes or node_count, not both")
        if self.nodes:
            expand_nodes(self.nodes)
        return self

    @property
    def fleet_mode(self) -> bool:
        return bool(self.nodes or self.node_count)

    def node_names(self) -> list[str]:
        if self.node_count:
            return [f"{self.node_name_prefix}{i}" for i in range(self.node_count)]
        if self.nodes:
            return expand_nodes(self.nodes)
        return [self.node_name]

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


def expand_nodes(spec: str) -> list[str]:
    """``"a,b,node-0..node-2"`` -> ``["a", "b", "node-0", "node-1", "node-2"]``; ValueError when malformed."""
    names: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if ".." in part:
            m = _RANGE.match(part)
            if not m or int(m["end"]) < int(m["start"]):
                raise ValueError(f"bad node range {part!r} (want e.g. node-0..node-199)")
            names.extend(f"{m['prefix']}{i}" for i in range(int(m["start"]), int(m["end"]) + 1))
        else:
            names.append(part)
    if len(set(names)) != len(names):
        raise ValueError("node names repeat")
    return names
