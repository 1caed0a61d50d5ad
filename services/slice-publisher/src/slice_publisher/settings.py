"""Settings of slice-publisher: flags, ``DRAFLOW_SLICE_PUBLISHER_*`` environment variables, defaults.

Single-node mode (the default) serves ``--node-name`` and watches ``--registry-dir`` (the kubelet's plugin
watcher directory). Fleet mode (``--fleet-root``) serves every ``<root>/<node>/plugins_registry`` directory,
the layout the reference driver and kubelet-dra-shim use for simulated nodes.
"""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from draflow_runtime.nodeagent import NodeSettings


class PublisherSettings(NodeSettings):
    """slice-publisher: drivers' inventory streams to ResourceSlices, for one node or a fleet of nodes."""

    model_config = SettingsConfigDict(env_prefix="DRAFLOW_SLICE_PUBLISHER_")

    registry_dir: str = Field(
        "/var/lib/kubelet/plugins_registry",
        description="Single-node mode: directory of the drivers' registration sockets (<driver>-reg.sock).",
    )
    fleet_root: str = Field(
        "",
        description="Fleet mode: serve every <root>/<node>/plugins_registry; empty means single-node mode.",
    )
    registry_poll_interval: float = Field(
        1.0, gt=0, description="Seconds between scans of the registration directories."
    )
    startup_grace: float = Field(
        30.0,
        ge=0,
        description="Seconds after start-up before slices of drivers that did not register are deleted.",
    )
    wipe_foreign_slices: bool = Field(
        False,
        description="Start-up: also delete the served nodes' slices not written by slice-publisher whose "
        "driver did not register (simulated nodes only: on a real node a late driver would lose its "
        "own slices).",
    )
    driver_gone_grace: float = Field(
        30.0,
        ge=0,
        description="Seconds a vanished driver's devices stay published (tainted) before its slices go.",
    )
    taint_unavailable: bool = Field(
        True,
        description="Taint the devices of a vanished driver (draflow.dev/driver-unavailable, NoSchedule).",
    )
    driver_gone_rule_min_pools: int = Field(
        100,
        ge=0,
        description="Fleet mode: when at least this many nodes lost the driver and no published pool of "
        "the driver is left, taint its devices with one DeviceTaintRule instead of a write per pool "
        "(0: never; needs DeviceTaintRules served and the RBAC to create them).",
    )
    driver_gone_coalesce: float = Field(
        1.0,
        ge=0,
        description="Fleet mode with driver-gone rules: seconds a vanished driver's pools wait before their "
        "slices are tainted, so that one DeviceTaintRule can cover them all first.",
    )
    taint_unhealthy: bool = Field(
        True, description="Taint devices the driver reports unhealthy (draflow.dev/unhealthy, NoSchedule)."
    )
    reserve_taint_room: bool = Field(
        True,
        description="Split every pool at 64 devices per slice so that adding taints never re-splits it.",
    )
    grpc_timeout: float = Field(
        5.0, gt=0, description="Seconds a GetInfo call on a registration socket may take."
    )
    reconnect_max_backoff: float = Field(
        5.0, gt=0, description="Longest wait between attempts to reach a driver that went away."
    )
    workers: int = Field(
        64,
        ge=1,
        description="Pools synced concurrently: their slice writes in flight at once (a driver gone from "
        "1,000 nodes is 1,000 writes, which the API server takes in parallel).",
    )
    field_manager: str = Field("draflow-slice-publisher", description="Field manager of every write.")

    @model_validator(mode="after")
    def _check_mode(self) -> PublisherSettings:
        if not self.fleet_root and not self.node_name:
            raise ValueError("node_name is required in single-node mode")
        return self

    @property
    def fleet_mode(self) -> bool:
        return bool(self.fleet_root)
