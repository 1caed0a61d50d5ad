"""Settings of the reference driver: flags, `DRAFLOW_REFERENCE_DRIVER_*` environment variables, defaults.

Single-node mode (the default) serves one node named ``--node-name`` with the kubelet's directory layout.
Fleet mode (``--nodes`` or ``--node-count``) serves many simulated nodes from one process, each with its
own directories under ``--fleet-root`` (see :mod:`reference_driver.fleet`).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from draflow_runtime.nodeagent import FleetSettings

DRIVER_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
Profile = Literal["plain", "partitionable", "consumable"]


class DriverSettings(FleetSettings):
    """reference-driver: a DRA kubelet plugin with fake GPUs (one node, or a fleet of simulated nodes)."""

    model_config = SettingsConfigDict(env_prefix="DRAFLOW_REFERENCE_DRIVER_")

    driver_name: str = Field(
        "gpu.draflow.example", description="DRA driver name (a DNS subdomain); also the CDI vendor."
    )
    cdi_class: str = Field("gpu", description="CDI device class: CDI kind is <driver-name>/<cdi-class>.")
    registry_dir: str = Field(
        "/var/lib/kubelet/plugins_registry",
        description="Kubelet plugin-watcher directory; the registration socket is <dir>/<driver>-reg.sock.",
    )
    plugins_dir: str = Field(
        "/var/lib/kubelet/plugins",
        description="Parent of the driver's socket directory; the DRA socket is <dir>/<driver>/dra.sock.",
    )
    cdi_root: str = Field("/var/run/cdi", description="Directory the per-claim CDI spec files go to.")
    state_dir: str = Field(
        "/var/lib/draflow/reference-driver",
        description="Directory of the checkpoint and the health control file (health.json).",
    )
    # -- fleet mode ---------------------------------------------------------------------------------
    fleet_root: str = Field(
        "/var/lib/draflow/fleet",
        description="Fleet mode: per-node plugins_registry, plugins, cdi and state dirs under <root>/<node>.",
    )
    # -- inventory ----------------------------------------------------------------------------------
    inventory_file: str = Field(
        "",
        description="JSON or YAML inventory file overriding the inventory settings below; re-read on change.",
    )
    profile: Profile = Field("plain", description="Device layout: plain, partitionable or consumable.")
    gpu_count: int = Field(8, ge=0, le=4096, description="Fake GPUs per node.")
    gpu_model: str = Field("draflow-fake-gpu", description="Value of the 'model' attribute.")
    gpu_memory: str = Field("80Gi", description="Memory capacity of one GPU (quantity).")
    gpu_compute: str = Field("100", description="Compute capacity of one GPU (quantity).")
    partitions_per_gpu: int = Field(4, ge=1, le=16, description="Partitions per GPU (partitionable).")
    driver_version: str = Field("1.0.0", description="Value of the 'driverVersion' version attribute.")
    # -- behaviour ----------------------------------------------------------------------------------
    poll_interval: float = Field(
        1.0, gt=0, description="Seconds between checks of the inventory file and the health control files."
    )
    health_resend_interval: float = Field(
        10.0, gt=0, description="Seconds between unchanged NodeWatchResources messages (a heartbeat)."
    )
    health_check_timeout_seconds: int = Field(
        30, ge=0, description="Sent in DeviceHealth: the kubelet marks a silent device Unknown after this."
    )
    taint_unhealthy_devices: bool = Field(
        True, description="Add a NoSchedule taint <driver>/unhealthy to unhealthy devices in the inventory."
    )
    use_passed_claims: bool = Field(
        True,
        description="NodePrepareResources: use the claims the caller passes in the gRPC metadata "
        "(draflow-claim-bin; kubelet-dra-shim sends what it just read) instead of reading them again; "
        "claims not passed are read from the API server.",
    )

    @field_validator("driver_name")
    @classmethod
    def _check_driver_name(cls, value: str) -> str:
        if len(value) > 63 or not DRIVER_NAME_RE.match(value):
            raise ValueError("must be a lower-case DNS subdomain of at most 63 characters (gpu.example.com)")
        return value

