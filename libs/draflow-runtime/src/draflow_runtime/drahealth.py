"""Which ``DRAResourceHealth`` service to watch on a DRA plugin, the way kubelet v1.37.1 negotiates it.

A plugin lists the services it serves in ``PluginInfo.supported_versions`` (``GetInfo`` on its
registration socket). The health service is chosen by the *watcher's* preference, not the plugin's
order: ``v1.DRAResourceHealth`` if listed, else ``v1alpha1.DRAResourceHealth``, else none. Both versions
have the same messages (``NodeWatchResources``, ``DeviceHealth``, ``HealthStatus`` numbered alike); only
the proto package differs, so :data:`HEALTH_APIS` maps each service to its generated modules.

Shared by kubelet-dra-shim (pods' ``allocatedResourcesStatus``) and slice-publisher (unhealthy taints)
so that both always watch the same version of a driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_protos.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from draflow_protos.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from draflow_protos.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc

HEALTH_V1 = "v1.DRAResourceHealth"
HEALTH_V1ALPHA1 = "v1alpha1.DRAResourceHealth"
#: The DRAResourceHealth services spoken, most preferred first (kubelet v1.37.1's list and order).
HEALTH_SERVICES: tuple[str, ...] = (HEALTH_V1, HEALTH_V1ALPHA1)
#: service -> (messages module, gRPC module: ``DRAResourceHealthStub``, ``add_..._to_server``).
HEALTH_APIS: dict[str, tuple[ModuleType, ModuleType]] = {
    HEALTH_V1: (health_v1, health_v1_grpc),
    HEALTH_V1ALPHA1: (health_v1alpha1, health_v1alpha1_grpc),
}


def choose_health_service(plugin_versions: Sequence[str]) -> str:
    """The health service to watch: the first of :data:`HEALTH_SERVICES` the plugin lists, else ""."""
    for service in HEALTH_SERVICES:
        if service in plugin_versions:
            return service
    return ""
