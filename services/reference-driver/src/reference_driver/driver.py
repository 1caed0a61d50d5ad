"""The gRPC face of one node: registration, DRAPlugin v1 + v1beta1, DRAResourceHealth v1 + v1alpha1,
Inventory.

One ``grpc.aio`` server per node listens on two unix sockets, the registration socket
``<registry dir>/<driver>-reg.sock`` (what the kubelet's plugin watcher dials) and the service socket
``<plugins dir>/<driver>/dra.sock`` (the endpoint GetInfo announces). Both sockets serve all services;
the kubelet only calls Registration on the first and the others on the second. One server per node,
rather than one server with many ports, because a grpc.aio handler cannot tell which port a call came
in on; a server costs ~15-40 KiB, measured (README).

Every unary RPC gets a server span that continues the caller's trace from the gRPC metadata (W3C
``traceparent``) through OpenTelemetry's grpc.aio server interceptor (what
``draflow_runtime.tracing.grpc_server_interceptors`` builds, here with a filter that leaves out the
long-lived health and inventory streams).
"""

from __future__ import annotations

import asyncio
import contextlib
import stat
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
from opentelemetry.instrumentation.grpc import aio_server_interceptor

from draflow_protos.dra.v1 import api_pb2 as dra_v1
from draflow_protos.dra.v1 import api_pb2_grpc as dra_v1_grpc
from draflow_protos.dra.v1beta1 import api_pb2 as dra_v1beta1
from draflow_protos.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_protos.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from draflow_protos.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from draflow_protos.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_protos.inventory.v1 import inventory_pb2_grpc as inv_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from draflow_runtime.log import bind, get_logger
from draflow_runtime.passedclaims import claims_from_metadata
from reference_driver.node import NodeDriver

log = get_logger(__name__)

PLUGIN_TYPE = "DRAPlugin"
# What upstream's v0.37.1 kubeletplugin helper advertises with health on: the DRA service versions, then the
# health services (kubelet v1.37 watches v1.DRAResourceHealth, older kubelets v1alpha1).
SUPPORTED_VERSIONS = (
    "v1.DRAPlugin",
    "v1beta1.DRAPlugin",
    "v1.DRAResourceHealth",
    "v1alpha1.DRAResourceHealth",
)

# Long-lived streams get no span: a span lasting for the life of a connection tells nothing, and
# OpenTelemetry's aio stream wrapper logs "Failed to detach context" when the client cancels the stream.
_UNTRACED = ("/v1.DRAResourceHealth/", "/v1alpha1.DRAResourceHealth/", "/draflow.inventory.v1.Inventory/")
_interceptors: list[Any] | None = None


def _traced(details: Any) -> bool:
    method = details.method.decode() if isinstance(details.method, bytes) else str(details.method)
    return not method.startswith(_UNTRACED)


def _tracing_interceptors() -> list[Any]:
    """One interceptor for all servers of the process (it holds nothing but the tracer)."""
    global _interceptors
    if _interceptors is None:
        _interceptors = [aio_server_interceptor(filter_=_traced)]
    return _interceptors


class Registration(reg_grpc.RegistrationServicer):
    """Kubelet plugin registration, as upstream's kubeletplugin registrar answers it."""

    def __init__(self, node: NodeDriver) -> None:
        self.node = node

    async def GetInfo(self, request: reg_pb.InfoRequest, context: Any) -> reg_pb.PluginInfo:
        return reg_pb.PluginInfo(
            type=PLUGIN_TYPE,
            name=self.node.identity.driver_name,
            endpoint=str(self.node.paths.dra_socket),
            supported_versions=list(SUPPORTED_VERSIONS),
        )

    async def NotifyRegistrationStatus(
        self, request: reg_pb.RegistrationStatus, context: Any
    ) -> reg_pb.RegistrationStatusResponse:
        self.node.registered = request.plugin_registered
        with bind(node=self.node.node_name, driver=self.node.identity.driver_name):
            if not request.plugin_registered:
                # Anyone who can reach the socket may send this: bound what is logged and echoed (a
                # gRPC status message travels in a trailer; clients refuse trailers over 16 KiB).
                error = _bounded(request.error)
                log.error("kubelet rejected the plugin registration", error=error)
                # Upstream answers with an error too; the kubelet ignores it.
                await context.abort(grpc.StatusCode.UNKNOWN, f"failed registration process: {error}")
            log.info("plugin registered with the kubelet")
        return reg_pb.RegistrationStatusResponse()


ECHO_LIMIT = 1024
"""Characters of a caller's error text the driver logs and echoes back."""


def _bounded(text: str) -> str:
    return text if len(text) <= ECHO_LIMIT else f"{text[:ECHO_LIMIT]}... ({len(text)} characters)"


def _claims(request: Any) -> Sequence[tuple[str, str, str]]:
    return [(c.namespace, c.name, c.uid) for c in request.claims]


class _DRAPlugin:
    """NodePrepareResources / NodeUnprepareResources for one proto version (v1 or v1beta1)."""

    pb: ModuleType
    with_share_id: bool

    def __init__(self, node: NodeDriver) -> None:
        self.node = node

    async def NodePrepareResources(self, request: Any, context: Any) -> Any:
        passed = claims_from_metadata(context.invocation_metadata()) if self.node.use_passed_claims else {}
        outcomes = await self.node.prepare(_claims(request), passed)
        response = self.pb.NodePrepareResourcesResponse()
        for uid, outcome in outcomes.items():
            entry = response.claims[uid]
            if outcome.error:
                entry.error = outcome.error
                continue
            for device in outcome.devices:
                out = entry.devices.add(
                    request_names=list(device.request_names),
                    pool_name=device.pool_name,
                    device_name=device.device_name,
                    cdi_device_ids=list(device.cdi_device_ids),
                )
                if self.with_share_id and device.share_id is not None:
                    out.share_id = device.share_id
        return response

    async def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        errors = await self.node.unprepare(_claims(request))
        response = self.pb.NodeUnprepareResourcesResponse()
        for uid, error in errors.items():
            response.claims[uid].error = error
        return response


class DRAPluginV1(_DRAPlugin, dra_v1_grpc.DRAPluginServicer):
    pb = dra_v1
    with_share_id = True


class DRAPluginV1beta1(_DRAPlugin, dra_v1beta1_grpc.DRAPluginServicer):
    pb = dra_v1beta1
    with_share_id = False


class _ResourceHealth:
    """Full device list on connect, after every change, and at least every ``resend_interval``, for one
    proto version (v1 or v1alpha1: the same messages in another package)."""

    pb: ModuleType

    def __init__(self, node: NodeDriver, resend_interval: float) -> None:
        self.node = node
        self.resend_interval = resend_interval

    async def NodeWatchResources(self, request: Any, context: Any) -> AsyncIterator[Any]:
        while True:
            seen = self.node.changes.revision
            yield self.node.health_response(self.pb)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.resend_interval):
                    await self.node.changes.wait(seen)


class ResourceHealthV1(_ResourceHealth, health_v1_grpc.DRAResourceHealthServicer):
    pb = health_v1


class ResourceHealthV1alpha1(_ResourceHealth, health_v1alpha1_grpc.DRAResourceHealthServicer):
    pb = health_v1alpha1


class Inventory(inv_grpc.InventoryServicer):
    """The node's complete desired inventory on connect and after every change."""

    def __init__(self, node: NodeDriver) -> None:
        self.node = node

    async def ListAndWatchResources(  # type: ignore[override]
        self, request: inv.ListAndWatchResourcesRequest, context: Any
    ) -> AsyncIterator[inv.ListAndWatchResourcesResponse]:
        if request.node_name and request.node_name != self.node.node_name:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"this socket serves node {self.node.node_name}, not {request.node_name}",
            )
        with bind(node=self.node.node_name, driver=self.node.identity.driver_name):
            log.info("inventory stream opened")
            while True:
                seen = self.node.changes.revision
                yield self.node.inventory_response()
                await self.node.changes.wait(seen)


def _unlink_stale_socket(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(f"{path} exists and is not a socket")
    path.unlink()


class NodeServer:
    """The grpc.aio server of one node, listening on its registration and DRA sockets."""

    def __init__(self, node: NodeDriver, *, health_resend_interval: float = 10.0) -> None:
        self.node = node
        self.server = grpc.aio.server(interceptors=_tracing_interceptors())
        reg_grpc.add_RegistrationServicer_to_server(Registration(node), self.server)
        dra_v1_grpc.add_DRAPluginServicer_to_server(DRAPluginV1(node), self.server)
        dra_v1beta1_grpc.add_DRAPluginServicer_to_server(DRAPluginV1beta1(node), self.server)
        health_v1_grpc.add_DRAResourceHealthServicer_to_server(
            ResourceHealthV1(node, health_resend_interval), self.server
        )
        health_v1alpha1_grpc.add_DRAResourceHealthServicer_to_server(
            ResourceHealthV1alpha1(node, health_resend_interval), self.server
        )
        inv_grpc.add_InventoryServicer_to_server(Inventory(node), self.server)
        self._bound: list[Path] = []

    async def start(self) -> None:
        """Bind both sockets (unlinking stale ones first) and start serving."""
        # The DRA socket first: once the registration socket appears the kubelet may call at once.
        for path in (self.node.paths.dra_socket, self.node.paths.registration_socket):
            _unlink_stale_socket(path)
            self.server.add_insecure_port(f"unix://{path}")
            self._bound.append(path)
        await self.server.start()

    async def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving and remove our sockets (the kubelet then deregisters the plugin)."""
        await self.server.stop(grace)
        for path in reversed(self._bound):
            path.unlink(missing_ok=True)
        self._bound.clear()
