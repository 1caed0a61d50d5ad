"""get_logger's short route: the same lines as structlog's stdlib route, byte for byte; and the stdlib
route, with what it honours (capture_logs, the root logger's current handlers, levels), whenever the
set-up is not the one configure_logging made."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from opentelemetry import trace
from structlog.testing import capture_logs

from draflow_runtime.log import bind, configure_logging, get_logger
from draflow_testenv.logcapture import json_logs

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?Z")
SPAN = trace.NonRecordingSpan(trace.SpanContext(
    trace_id=0x5B8EFFF798038103D269B633813FC60C, span_id=0xEEE19B7EC3C1B174, is_remote=False,
    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
))


@pytest.fixture
def restored_root() -> Iterator[None]:
    """The root logger's handlers and level put back after a test that configures logging itself."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])


@pytest.fixture
def records_made() -> Iterator[list[int]]:
    """How many stdlib LogRecords were made (one count per record), while the test runs."""
    made = [0]
    previous = logging.getLogRecordFactory()

    def counting(*args: Any, **kwargs: Any) -> logging.LogRecord:
        made[0] += 1
        return previous(*args, **kwargs)

    logging.setLogRecordFactory(counting)
    try:
        yield made
    finally:
        logging.setLogRecordFactory(previous)


class Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


CALLS = 11


def log_everything(make: Callable[..., Any]) -> None:
    """One of each kind of call the services make (CALLS of them), through loggers ``make(name, **initial)``
    builds."""
    log = make("demo.routes")
    log.info("claim allocated", node="node-1", devices=["gpu-0", "gpu-1"], count=2, ratio=0.5, ok=True)
    log.debug("below nothing", value=None, thing=Opaque())
    bound = make("demo.routes", pool="p1").bind(driver="gpu.example.com", node="bound-node")
    with bind(claim="ns/c", pod="ns/p"), bind(node="context-node"):
        bound.warning("bound context", node="call-node", claim="call-claim")  # the call's keys win
        bound.info("only bound")
    log.info("retry %s of %d", "watch", 3)
    log.info("by name %(what)s", {"what": "dict argument"})
    try:
        raise ValueError("bad input")
    except ValueError as exc:
        log.exception("reconcile failed", key="ns/c")
        log.error("given exception", exc_info=exc)
        log.warning("given true", exc_info=True)
    with trace.use_span(SPAN):
        log.critical("inside a span", step=1)
    make(None).info("root logger")


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_short_route_lines_equal_the_stdlib_routes_byte_for_byte(
    fmt: str, restored_root: None, records_made: list[int]
) -> None:
    def written(make: Callable[..., Any]) -> str:
        stream = io.StringIO()
        configure_logging("demo", "debug", fmt, stream=stream)
        records_made[0] = 0
        log_everything(make)
        return stream.getvalue()

    stdlib = written(structlog.stdlib.get_logger)
    assert records_made[0] > 0  # the comparison is between two routes: this one went through stdlib
    short = written(get_logger)
    assert records_made[0] == 0

    assert len(TIMESTAMP.findall(stdlib)) == len(TIMESTAMP.findall(short)) == CALLS
    # Everything but the time of each call, byte for byte (tracebacks included).
    assert TIMESTAMP.sub("T", short) == TIMESTAMP.sub("T", stdlib)


def test_capture_logs_sees_debug_lines_after_an_info_level_configure() -> None:
    log = get_logger("demo.capture", pool="p1")
    with json_logs("demo", "info") as stream:
        log.debug("hidden")
        with capture_logs() as captured:
            log.debug("quiet step", key="ns/c")
            log.bind(node="n1").info("loud step")
        log.debug("hidden again")
    assert captured == [
        {"pool": "p1", "key": "ns/c", "event": "quiet step", "log_level": "debug"},
        {"pool": "p1", "node": "n1", "event": "loud step", "log_level": "info"},
    ]
    assert stream.getvalue() == ""


def test_a_later_configure_logging_changes_the_level_of_existing_loggers(restored_root: None) -> None:
    log = get_logger("demo.level")
    bound = log.bind(claim="ns/c")
    stream = io.StringIO()
    configure_logging("demo", "info", stream=stream)
    log.debug("one")
    bound.debug("two")
    configure_logging("demo", "debug", stream=stream)
    log.debug("three")
    bound.debug("four")
    configure_logging("demo", "error", stream=stream)
    bound.warning("five")
    assert [json.loads(line)["event"] for line in stream.getvalue().splitlines()] == ["three", "four"]


def test_a_level_set_on_a_named_stdlib_logger_applies(restored_root: None) -> None:
    stream = io.StringIO()
    configure_logging("demo", "debug", stream=stream)
    noisy = logging.getLogger("demo.noisy")
    noisy.setLevel(logging.WARNING)
    try:
        get_logger("demo.noisy").info("dropped")
        get_logger("demo.noisy").warning("kept")
        get_logger("demo.quiet").info("kept too")
    finally:
        noisy.setLevel(logging.NOTSET)
    assert [json.loads(line)["event"] for line in stream.getvalue().splitlines()] == ["kept", "kept too"]


def test_lines_follow_the_root_handlers_once_they_are_replaced(restored_root: None) -> None:
    configured, replacing = io.StringIO(), io.StringIO()
    configure_logging("demo", "info", stream=configured)
    log = get_logger("demo.handlers")
    log.info("before")
    root = logging.getLogger()
    (ours,) = root.handlers
    root.removeHandler(ours)
    other = logging.StreamHandler(replacing)
    other.setFormatter(ours.formatter)  # the same lines, to another place (as json_logs' restore does)
    root.addHandler(other)
    log.info("after")
    assert ('"before"' in configured.getvalue(), '"after"' in configured.getvalue()) == (True, False)
    assert '"event": "after"' in replacing.getvalue()
