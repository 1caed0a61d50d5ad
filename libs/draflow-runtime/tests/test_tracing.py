"""Trace context round-trips through annotations, NATS headers and gRPC metadata (in-memory exporter)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from draflow_runtime.tracing import (
    TRACEPARENT_ANNOTATION,
    TRACESTATE_ANNOTATION,
    context_from_annotations,
    context_from_headers,
    context_from_metadata,
    grpc_client_interceptors,
    grpc_server_interceptors,
    inject_into_annotations,
    inject_into_headers,
    inject_into_metadata,
    setup_tracing,
)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = setup_tracing("unit", exporter=exporter, set_global=False)
    yield provider
    provider.shutdown()


def finished(provider: TracerProvider, exporter: InMemorySpanExporter) -> dict[str, object]:
    provider.force_flush()
    return {span.name: span for span in exporter.get_finished_spans()}


def test_annotation_round_trip_continues_the_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("t")
    original = {"keep": "me"}
    with tracer.start_as_current_span("create claim") as root:
        annotations = inject_into_annotations(original)
    ctx = context_from_annotations(annotations)
    assert ctx is not None
    with tracer.start_as_current_span("allocate", context=ctx):
        pass
    spans = finished(provider, exporter)
    child = spans["allocate"]
    assert child.context.trace_id == root.get_span_context().trace_id  # type: ignore[attr-defined]
    assert child.parent.span_id == root.get_span_context().span_id  # type: ignore[attr-defined]
    assert original == {"keep": "me"}, "the input (maybe from a cache) must not be modified"
    assert annotations["keep"] == "me"
    assert annotations[TRACEPARENT_ANNOTATION].startswith("00-")


def test_no_active_span_injects_nothing() -> None:
    assert inject_into_annotations({"a": "b"}) == {"a": "b"}
    assert "traceparent" not in inject_into_headers({})


@pytest.mark.parametrize(
    "annotations",
    [
        None,
        {},
        {"other": "x"},
        {TRACEPARENT_ANNOTATION: "garbage"},
        {TRACEPARENT_ANNOTATION: "00-" + "0" * 32 + "-" + "0" * 16 + "-01"},
    ],
    ids=["none", "empty", "absent", "malformed", "all-zero ids"],
)
def test_missing_or_invalid_annotation_gives_no_context(annotations: dict[str, str] | None) -> None:
    assert context_from_annotations(annotations) is None


def test_annotation_contexts_are_parsed_once_per_traceparent_and_tracestate() -> None:
    parent = "00-" + "5e" * 16 + "-" + "5a" * 8 + "-01"
    first = context_from_annotations({TRACEPARENT_ANNOTATION: parent, "a": "1"})
    again = context_from_annotations({TRACEPARENT_ANNOTATION: parent, "b": "2"})
    with_state = context_from_annotations({TRACEPARENT_ANNOTATION: parent, TRACESTATE_ANNOTATION: "k=v"})
    assert first is not None and again is first  # the parse of an annotation seen before is reused
    assert with_state is not None and with_state is not first
    assert trace.get_current_span(with_state).get_span_context().trace_state.get("k") == "v"
    span = trace.get_current_span(first).get_span_context()
    assert (format(span.trace_id, "032x"), format(span.span_id, "016x")) == ("5e" * 16, "5a" * 8)
    assert not span.trace_state


def test_header_round_trip_continues_the_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("publish") as publisher:
        headers = inject_into_headers({"Nats-Msg-Id": "1"})
    assert headers["Nats-Msg-Id"] == "1"
    ctx = context_from_headers(headers)
    assert ctx is not None
    remote = trace.get_current_span(ctx).get_span_context()
    assert remote.is_remote
    assert remote.trace_id == publisher.get_span_context().trace_id
    assert remote.span_id == publisher.get_span_context().span_id
    assert context_from_headers({}) is None
    assert context_from_headers(None) is None


def test_metadata_round_trip(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("call") as caller:
        metadata = inject_into_metadata([("x-other", "1")])
    assert ("x-other", "1") in metadata
    ctx = context_from_metadata(metadata)
    assert ctx is not None
    assert trace.get_current_span(ctx).get_span_context().trace_id == caller.get_span_context().trace_id


def test_service_name_comes_from_otel_service_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    provider = setup_tracing("default-name", exporter=InMemorySpanExporter(), set_global=False)
    assert provider.resource.attributes["service.name"] == "from-env"
    provider.shutdown()


def test_sdk_disabled_exports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    exporter = InMemorySpanExporter()
    provider = setup_tracing("off", exporter=exporter, set_global=False)
    with provider.get_tracer("t").start_as_current_span("x"):
        pass
    provider.force_flush()
    assert exporter.get_finished_spans() == ()
    provider.shutdown()


async def test_grpc_interceptors_carry_the_trace_over_a_unix_socket(
    provider: TracerProvider, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    seen: list[trace.SpanContext] = []

    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        seen.append(trace.get_current_span().get_span_context())
        return request

    server = grpc.aio.server(interceptors=grpc_server_interceptors(provider))
    handler = grpc.method_handlers_generic_handler(
        "demo.Echo", {"Say": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server.add_generic_rpc_handlers((handler,))
    address = f"unix://{tmp_path / 'echo.sock'}"
    assert server.add_insecure_port(address) == 1
    await server.start()
    try:
        async with grpc.aio.insecure_channel(address, interceptors=grpc_client_interceptors(provider)) as ch:
            with provider.get_tracer("t").start_as_current_span("caller") as caller:
                assert await ch.unary_unary("/demo.Echo/Say")(b"hi") == b"hi"
    finally:
        await server.stop(None)
    provider.force_flush()
    trace_id = caller.get_span_context().trace_id
    assert seen and seen[0].trace_id == trace_id
    kinds = {s.kind for s in exporter.get_finished_spans() if s.context.trace_id == trace_id}
    assert {trace.SpanKind.CLIENT, trace.SpanKind.SERVER} <= kinds
