"""One ``NodePrepareResources`` / ``NodeUnprepareResources`` call per driver, for one node.

:class:`DriverCalls` sends a driver all the claims of one step at once, records the devices (CDI IDs) a
prepare returned in each claim's :class:`~kubelet_dra_shim.checkpoint.ClaimInfo`, publishes the claim
events, and turns per-claim errors (and a missing driver, a failed call) into :class:`ClaimFailure` values:
a failure fails only its claim. Every call is a CLIENT span with the trace context in the gRPC metadata,
timed in ``draflow_shim_dra_operation_duration_seconds``; every claim's outcome (a missing driver and a
failed call count as an error of each claim) is counted in ``draflow_shim_claim_operations_total``. The
caller (:class:`~kubelet_dra_shim.manager.NodeManager`) holds the locks of the claims and owns the
checkpoint.

A call in flight when its driver deregisters is cut off: the registrar closes the driver's channel, and
grpc.aio cancels the calls of a channel it closes (the awaiting task sees ``CancelledError`` although
nobody cancelled it). That is a failed call like any other (:class:`ConnectionClosed`, reported as
``CANCELLED``, as Go's gRPC fails kubelet's call with ``Canceled: grpc: the client connection is
closing``), so its claims fail and are retried; a cancellation of the caller's own task still propagates.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from prometheus_client import Counter, Histogram

from draflow_runtime import tracing
from draflow_runtime.errors import DraflowError
from draflow_runtime.log import get_logger
from draflow_runtime.metrics import registered_collector
from draflow_runtime.passedclaims import claims_metadata
from draflow_runtime.reconcile import cancelled_by_caller

from .checkpoint import ClaimInfo, PreparedDevice
from .claimevents import ClaimEvents
from .plugins import Plugin, PluginStore

log = get_logger(__name__)

OPERATION_DURATION = registered_collector(
    Histogram,
    "draflow_shim_dra_operation_duration_seconds",
    "NodePrepareResources/NodeUnprepareResources round trips by driver and outcome (ok|error).",
    ["operation", "driver", "outcome"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 45.0),
)

# No node label: in fleet mode that would be a thousand series per driver.
CLAIM_OPERATIONS = registered_collector(
    Counter,
    "draflow_shim_claim_operations_total",
    "Claims prepared or unprepared through a driver, by operation (prepare|unprepare) and result (ok|error).",
    ["operation", "driver", "result"],
)


def _count(operation: str, driver: str, total: int, failed: int) -> None:
    if failed:
        CLAIM_OPERATIONS.labels(operation, driver, "error").inc(failed)
    if total > failed:
        CLAIM_OPERATIONS.labels(operation, driver, "ok").inc(total - failed)


@dataclass(frozen=True)
class ClaimFailure:
    """A claim that could not be prepared or unprepared, with the driver's (or our) message."""

    claim: str  # "<namespace>/<name>"
    driver: str
    message: str


def claim_key(info: ClaimInfo) -> str:
    return f"{info.namespace}/{info.claim_name}"


class ConnectionClosed(DraflowError):
    """A call cut off by the closing of its driver's channel (the driver deregistered mid-call)."""

    def __init__(self, driver: str, endpoint: str, method: str) -> None:
        super().__init__(f"{method} failed: CANCELLED: the connection to DRA driver {driver} was closed "
                         "(the driver deregistered)")
        self.driver = driver
        self.endpoint = endpoint
        self.method = method


def _failed(method: str, exc: grpc.aio.AioRpcError | ConnectionClosed) -> str:
    """The message of a call that failed as a whole."""
    if isinstance(exc, ConnectionClosed):
        return str(exc)
    return f"{method} failed: {exc.code().name}: {exc.details()}"


class DriverCalls:
    """The DRA calls of one node (see the module docstring)."""

    def __init__(
        self,
        node: str,
        store: PluginStore,
        events: ClaimEvents,
        tracer: trace.Tracer,
        rpc_timeout: float,
    ) -> None:
        self.node = node
        self.store = store
        self.events = events
        self.tracer = tracer
        self.rpc_timeout = rpc_timeout

    def unregistered(self, driver: str, claim: str) -> ClaimFailure | None:
        """``None`` when ``driver`` is registered on the node, else the prepare failure of ``claim``
        ("<namespace>/<name>"), counted as an error of it."""
        if self.store.get(driver) is not None:
            return None
        _count("prepare", driver, 1, 1)
        return ClaimFailure(claim, driver, f"DRA driver {driver} is not registered on node {self.node}")

    async def prepare(
        self, driver: str, infos: list[ClaimInfo], pod_key: str,
        claims: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> dict[str, ClaimFailure]:
        """One NodePrepareResources for ``infos``; record devices; return failures by claim UID.
        ``claims``: claim UID -> the claim as just read live, passed along for the driver
        (:mod:`draflow_runtime.passedclaims`: a driver that uses it skips its own GET)."""
        failures = await self._prepare(driver, infos, pod_key, claims or {})
        _count("prepare", driver, len(infos), len(failures))
        return failures

    async def _prepare(
        self, driver: str, infos: list[ClaimInfo], pod_key: str, claims: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, ClaimFailure]:
        plugin = self.store.get(driver)
        if plugin is None:
            msg = f"DRA driver {driver} is not registered on node {self.node}"
            return {i.claim_uid: ClaimFailure(claim_key(i), driver, msg) for i in infos}
        m = plugin.messages
        request = m.NodePrepareResourcesRequest(
            claims=[m.Claim(namespace=i.namespace, uid=i.claim_uid, name=i.claim_name) for i in infos]
        )
        try:
            passed = claims_metadata(claims[i.claim_uid] for i in infos if i.claim_uid in claims)
            response = await self._call(plugin, "NodePrepareResources", request, passed)
        except (grpc.aio.AioRpcError, ConnectionClosed) as exc:
            msg = _failed("NodePrepareResources", exc)
            for info in infos:
                await self.events.prepare_failed(info, self.node, driver, pod_key, msg)
            return {i.claim_uid: ClaimFailure(claim_key(i), driver, msg) for i in infos}
        failures: dict[str, ClaimFailure] = {}
        for info in infos:
            result = response.claims.get(info.claim_uid)
            if result is None:
                msg = "driver returned no result for the claim"
            elif result.error:
                msg = result.error
            else:
                info.drivers[driver] = [_device(d) for d in result.devices]
                await self.events.prepared(info, self.node, driver, pod_key)
                continue
            failures[info.claim_uid] = ClaimFailure(claim_key(info), driver, msg)
            await self.events.prepare_failed(info, self.node, driver, pod_key, msg)
        return failures

    async def _call(
        self, plugin: Plugin, method: str, request: Any, metadata: Sequence[tuple[str, Any]] = ()
    ) -> Any:
        """A unary call with a CLIENT span and the trace context (and ``metadata``) in the gRPC metadata.
        Raises the call's ``AioRpcError``, or :class:`ConnectionClosed` when the channel closed under it."""
        service = plugin.messages.DESCRIPTOR.package + ".DRAPlugin"
        started = time.perf_counter()
        outcome = "error"
        with self.tracer.start_as_current_span(
            f"{service}/{method}",
            kind=SpanKind.CLIENT,
            attributes={
                "rpc.system": "grpc",
                "rpc.service": service,
                "rpc.method": method,
                "draflow.driver": plugin.driver,
                "k8s.node.name": self.node,
                "server.address": plugin.endpoint,
            },
        ) as span:
            try:
                response = await getattr(plugin.stub(), method)(
                    request, timeout=self.rpc_timeout, metadata=[*tracing.inject_into_metadata(), *metadata]
                )
                outcome = "ok"
                return response
            except grpc.aio.AioRpcError as exc:
                span.set_attribute("rpc.grpc.status_code", exc.code().value[0])
                span.set_status(Status(StatusCode.ERROR, exc.details() or exc.code().name))
                raise
            except asyncio.CancelledError as exc:
                if cancelled_by_caller():
                    raise
                closed = ConnectionClosed(plugin.driver, plugin.endpoint, method)
                span.set_attribute("rpc.grpc.status_code", grpc.StatusCode.CANCELLED.value[0])
                span.set_status(Status(StatusCode.ERROR, str(closed)))
                log.warning("driver call cut off by its channel closing", node=self.node,
                            driver=plugin.driver, endpoint=plugin.endpoint, method=method)
                raise closed from exc
            finally:
                OPERATION_DURATION.labels(method, plugin.driver, outcome).observe(
                    time.perf_counter() - started
                )

    async def unprepare(self, driver: str, infos: list[ClaimInfo]) -> dict[str, ClaimFailure]:
        """One NodeUnprepareResources; return failures by claim UID. The claims are left as they are:
        the caller forgets a claim once every one of its drivers unprepared it."""
        failures = await self._unprepare(driver, infos)
        _count("unprepare", driver, len(infos), len(failures))
        return failures

    async def _unprepare(self, driver: str, infos: list[ClaimInfo]) -> dict[str, ClaimFailure]:
        plugin = self.store.get(driver)
        if plugin is None:
            msg = f"DRA driver {driver} is not registered on node {self.node}"
            return {i.claim_uid: ClaimFailure(claim_key(i), driver, msg) for i in infos}
        m = plugin.messages
        request = m.NodeUnprepareResourcesRequest(
            claims=[m.Claim(namespace=i.namespace, uid=i.claim_uid, name=i.claim_name) for i in infos]
        )
        with self.tracer.start_as_current_span(
            "unprepare claims",
            attributes={"k8s.node.name": self.node, "draflow.driver": driver, "draflow.claims": len(infos)},
        ):
            try:
                response = await self._call(plugin, "NodeUnprepareResources", request)
            except (grpc.aio.AioRpcError, ConnectionClosed) as exc:
                msg = _failed("NodeUnprepareResources", exc)
                return {i.claim_uid: ClaimFailure(claim_key(i), driver, msg) for i in infos}
        failures: dict[str, ClaimFailure] = {}
        for info in infos:
            result = response.claims.get(info.claim_uid)
            if result is None or result.error:
                msg = result.error if result is not None else "driver returned no result for the claim"
                failures[info.claim_uid] = ClaimFailure(claim_key(info), driver, msg)
                continue
            await self.events.unprepared(info, self.node, driver)
            log.info("claim unprepared", node=self.node, claim=claim_key(info), driver=driver)
        return failures


def _device(d: Any) -> PreparedDevice:
    share_id = d.share_id if "share_id" in d.DESCRIPTOR.fields_by_name and d.HasField("share_id") else None
    return PreparedDevice(
        pool_name=d.pool_name,
        device_name=d.device_name,
        request_names=list(d.request_names),
        cdi_device_ids=list(d.cdi_device_ids),
        share_id=share_id,
    )
