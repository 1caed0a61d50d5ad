"""Which ``DRAResourceHealth`` service to watch on a DRA plugin, the way kubelet v1.37.1 negotiates it.

A plugin lists the services it serves in ``PluginInfo.supported_versions`` (``GetInfo`` on its
registration socket). The health service is chosen by the *watcher's* preference, not the plugin's
order: ``v1.DRAResourceHealth`` if listed, else ``v1alpha1.DRAResourceHealth``, else none. Both versions
have the same messages (``NodeWatchResources``, ``DeviceHealth``, ``HealthStatus`` numbered alike); only
the proto package differs, so :data:`HEALTH_APIS` maps each service to its generated modules.

Shared by kubelet-dra-shim (pods' ``allocatedResourcesStatus``) and slice-publisher (unhealthy taints)
so that both always watch the same version of a driver, with the same client: :func:`watch_health` keeps
``NodeWatchResources`` open, hands every message (the driver's full device list) over as
:class:`DeviceReport` values, and when the stream ends forgets the driver's health (``on_lost``, as
kubelet's ``healthinfo`` does) and opens it again after ``retry`` seconds; a plugin that answers
UNIMPLEMENTED is left alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import grpc

from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_protos.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from draflow_protos.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from draflow_protos.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc

from .log import get_logger

log = get_logger(__name__)

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


#: Seconds between attempts to open a health stream again.
HEALTH_RETRY = 5.0
#: A device's report is valid this long unless the driver says otherwise (kubelet's default).
DEFAULT_HEALTH_TIMEOUT = 30.0
# Both versions number HealthStatus alike (UNKNOWN 0, HEALTHY 1, UNHEALTHY 2).
_STATES = {health_v1.HEALTHY: "Healthy", health_v1.UNHEALTHY: "Unhealthy", health_v1.UNKNOWN: "Unknown"}


@dataclass(frozen=True, slots=True)
class DeviceReport:
    """One device of a health message. ``state``: Healthy, Unhealthy or Unknown; ``pool`` as the driver
    sent it ("" when it named none)."""

    pool: str
    device: str
    state: str
    message: str
    timeout: float  # seconds the report stays valid


def device_reports(resp: object) -> list[DeviceReport]:
    """The devices of a ``NodeWatchResourcesResponse`` (either version)."""
    return [
        DeviceReport(
            d.device.pool_name,
            d.device.device_name,
            _STATES.get(d.health, "Unknown"),
            d.message,
            _timeout(d.health_check_timeout_seconds),
        )
        for d in resp.devices  # type: ignore[attr-defined]
    ]


def _timeout(seconds: int) -> float:
    """A report's validity: a zero or negative timeout means the default (kubelet v1.37.1)."""
    return float(seconds) if seconds > 0 else DEFAULT_HEALTH_TIMEOUT


async def watch_health(
    channel: grpc.aio.Channel,
    service: str,
    on_report: Callable[[list[DeviceReport]], None],
    on_lost: Callable[[], None],
    *,
    retry: float = HEALTH_RETRY,
    **log_fields: str,
) -> None:
    """Watch ``service`` (a :data:`HEALTH_SERVICES` entry) on ``channel`` until cancelled (see the module
    docstring); returns if the plugin does not serve it. ``log_fields`` (node, driver) go on every line."""
    messages, grpc_module = HEALTH_APIS[service]
    logger = log.bind(service=service, **log_fields)
    logger.info("watching device health")
    while True:
        try:
            stub = grpc_module.DRAResourceHealthStub(channel)
            async for resp in stub.NodeWatchResources(messages.NodeWatchResourcesRequest()):
                on_report(device_reports(resp))
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                logger.info("health service advertised but not served")
                return
            logger.info("health stream broke", error=f"{exc.code().name}: {exc.details()}")
        except Exception:
            logger.exception("health stream failed")
        on_lost()
        await asyncio.sleep(retry)
