"""Spans leave the process over OTLP/gRPC and reach a real receiver."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from draflow_runtime.tracing import setup_tracing

pytestmark = pytest.mark.integration


async def test_span_is_exported_over_otlp_with_the_service_name(
    otlp_receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://{otlp_receiver.endpoint}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    service = f"runtime-it-{uuid.uuid4().hex[:8]}"

    provider = setup_tracing(service, set_global=False)
    with provider.get_tracer("test").start_as_current_span("exported") as span:
        trace_id = format(span.get_span_context().trace_id, "032x")
    # The exporter is synchronous and the receiver runs on this event loop: flush from a thread.
    assert await asyncio.to_thread(provider.force_flush)
    await asyncio.to_thread(provider.shutdown)

    (received,) = await otlp_receiver.wait_for(
        lambda spans: [s for s in spans if s.trace_id == trace_id], timeout=30
    )
    assert received.name == "exported"
    assert received.service_name == service
