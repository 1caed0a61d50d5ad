"""The in-process OTLP receiver decodes what a real OpenTelemetry SDK exporter sends (no servers needed)."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from draflow_testenv.otlp import OtlpReceiver


async def test_receiver_collects_parent_and_child_spans_from_the_sdk_exporter(
    otlp_receiver: OtlpReceiver,
) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "te-probe"}))
    exporter = OTLPSpanExporter(endpoint=f"http://{otlp_receiver.endpoint}", insecure=True)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("te")
    with tracer.start_as_current_span("parent") as parent, \
            tracer.start_as_current_span("child", attributes={"claim": "ns/c", "count": 2}):
        pass
    trace_id = format(parent.get_span_context().trace_id, "032x")
    await asyncio.to_thread(provider.force_flush)  # the SDK exporter is blocking: keep it off the loop

    spans = await otlp_receiver.wait_for(lambda spans: len([s for s in spans if s.trace_id == trace_id]) == 2)
    assert spans
    by_name = {s.name: s for s in otlp_receiver.trace(trace_id)}
    assert by_name["child"].parent_span_id == by_name["parent"].span_id
    assert by_name["parent"].parent_span_id == ""
    assert by_name["child"].attributes == {"claim": "ns/c", "count": 2}
    assert by_name["child"].service_name == "te-probe"
    await asyncio.to_thread(provider.shutdown)


async def test_wait_for_times_out_with_what_was_received(otlp_receiver: OtlpReceiver) -> None:
    with pytest.raises(TimeoutError, match="no matching spans"):
        await otlp_receiver.wait_for(lambda spans: False, timeout=0.2)
