"""A real OTLP/gRPC trace receiver inside the test process.

It implements ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` on a grpc.aio server bound to a
free loopback port, decodes every exported span into a ``ReceivedSpan`` and lets a test wait for the spans
it expects. Point a service at it with ``OTEL_EXPORTER_OTLP_ENDPOINT=http://<endpoint>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from .wait import eventually


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root span
    name: str
    service_name: str
    kind: int
    start_unix_nano: int
    end_unix_nano: int
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""
    links: tuple[tuple[str, str], ...] = ()  # (trace_id, span_id) of each link
    status_code: int = 0


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def decode(request: trace_service_pb2.ExportTraceServiceRequest) -> list[ReceivedSpan]:
    """The spans of one Export request, flattened (pure)."""
    out = []
    for rs in request.resource_spans:
        resource = _attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(ReceivedSpan(
                    trace_id=s.trace_id.hex(), span_id=s.span_id.hex(), parent_span_id=s.parent_span_id.hex(),
                    name=s.name, service_name=str(resource.get("service.name", "")), kind=s.kind,
                    start_unix_nano=s.start_time_unix_nano, end_unix_nano=s.end_time_unix_nano,
                    attributes=_attrs(s.attributes), resource=resource, scope=ss.scope.name,
                    links=tuple((ln.trace_id.hex(), ln.span_id.hex()) for ln in s.links),
                    status_code=s.status.code,
                ))
    return out


class OtlpReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """Collects spans exported to it. ``async with OtlpReceiver() as r: ... r.endpoint, r.spans``."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.spans: list[ReceivedSpan] = []
        self._server: grpc.aio.Server | None = None

    @property
    def endpoint(self) -> str:
        """``host:port``; exporters want ``http://`` + this (insecure)."""
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        self._server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port(f"{self.host}:0")
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=1.0)
            self._server = None

    async def __aenter__(self) -> OtlpReceiver:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.aio.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.spans.extend(decode(request))
        return trace_service_pb2.ExportTraceServiceResponse()

    def clear(self) -> None:
        self.spans.clear()

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.trace_id == trace_id]

    async def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], Any], timeout: float = 10.0  # noqa: ASYNC109
    ) -> Any:
        """Wait until ``predicate(spans)`` is truthy and return its value; TimeoutError names what came."""
        try:
            return await eventually(lambda: predicate(list(self.spans)), timeout, "matching spans",
                                    interval=0.02)
        except AssertionError:
            names = sorted({(s.service_name, s.name) for s in self.spans})
            raise TimeoutError(f"no matching spans after {timeout}s; received {len(self.spans)}: "
                               f"{names[:30]}") from None
