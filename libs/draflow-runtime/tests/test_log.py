"""Logging: JSON lines with bound context, trace ids and stdlib records."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from draflow_runtime.log import bind, configure_logging, get_logger
from draflow_testenv.logcapture import json_logs


@pytest.fixture
def output() -> Iterator[io.StringIO]:
    with json_logs("demo") as stream:
        yield stream


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_line_is_json_with_constant_message_and_key_values(output: io.StringIO) -> None:
    get_logger("demo.x").info("claim allocated", node="node-1")
    (line,) = lines(output)
    assert line["event"] == "claim allocated"
    assert line["node"] == "node-1"
    assert line["level"] == "info"
    assert line["logger"] == "demo.x"
    assert line["service"] == "demo"
    assert "timestamp" in line


def test_bound_context_lands_on_every_line_and_is_removed_after(output: io.StringIO) -> None:
    log = get_logger("demo")
    with bind(claim="ns/c", pod="ns/p"):
        log.info("one")
        with bind(device="gpu-0"):
            log.info("two")
        logging.getLogger("stdlib").warning("three")
    log.info("four")
    one, two, three, four = lines(output)
    assert (one["claim"], one["pod"]) == ("ns/c", "ns/p")
    assert (two["claim"], two["device"]) == ("ns/c", "gpu-0")
    assert (three["claim"], three["logger"], three["event"]) == ("ns/c", "stdlib", "three")
    assert "claim" not in four and "device" not in four


async def test_context_bound_in_one_task_does_not_leak_into_another(output: io.StringIO) -> None:
    log = get_logger("demo")
    in_b = asyncio.Event()

    async def a() -> None:
        with bind(claim="a"):
            await in_b.wait()
            log.info("from a")

    async def b() -> None:
        with bind(claim="b"):
            in_b.set()
            await asyncio.sleep(0)  # one turn of the loop: a logs while b's binding is live (what is tested)
            log.info("from b")

    await asyncio.gather(a(), b())
    by_event = {line["event"]: line.get("claim") for line in lines(output) if line["logger"] == "demo"}
    assert by_event == {"from a": "a", "from b": "b"}


def test_active_span_adds_trace_and_span_ids(output: io.StringIO) -> None:
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("work") as span:
        get_logger("demo").info("inside")
    get_logger("demo").info("outside")
    inside, outside = lines(output)
    ctx = span.get_span_context()
    assert inside["traceID"] == format(ctx.trace_id, "032x")
    assert inside["spanID"] == format(ctx.span_id, "016x")
    assert "traceID" not in outside


def test_stdlib_records_share_format_and_level(output: io.StringIO) -> None:
    configure_logging("demo", "warning", "json", stream=output)
    std = logging.getLogger("kubernetes.client")
    std.info("hidden")
    std.warning("retrying %s", "watch", extra={"attempt": 2})
    get_logger("demo").info("hidden too")
    (line,) = lines(output)
    assert (line["event"], line["attempt"], line["level"]) == ("retrying watch", 2, "warning")


def test_exception_is_rendered_in_the_line(output: io.StringIO) -> None:
    try:
        raise ValueError("bad")
    except ValueError:
        get_logger("demo").exception("reconcile failed")
    (line,) = lines(output)
    assert "ValueError: bad" in line["exception"]


def test_console_format_renders_key_values() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = list(root.handlers)
    try:
        configure_logging("demo", "info", "console", stream=stream)
        get_logger("demo").info("hello", node="n1")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved:
            root.addHandler(handler)
    assert "hello" in stream.getvalue() and "node=n1" in stream.getvalue()
