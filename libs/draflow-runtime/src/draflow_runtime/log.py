"""Structured, contextual logging: one JSON object per line on stderr.

Every line carries ``timestamp``, ``level``, ``logger``, ``service``, ``event`` (the constant message), the
key/values of the call, everything bound with :func:`bind` in the current task, and ``traceID``/``spanID``
when an OpenTelemetry span is active. Records from stdlib ``logging`` (kubernetes client, aiohttp, nats)
go through the same processors and renderer.

    configure_logging("claim-controller", "info")
    log = get_logger(__name__)
    with bind(claim="ns/gpu-claim", pod="ns/p"):
        log.info("claim allocated", node="node-1")     # constant message, data as key/values

``bind`` uses :mod:`contextvars`, so context bound in a reconcile or RPC handler stays with that task (and
tasks it creates) and never leaks into concurrent ones.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, TextIO

import structlog
from opentelemetry import trace
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["bind", "configure_logging", "get_logger"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def add_trace_context(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Add ``traceID`` and ``spanID`` (hex) of the active OpenTelemetry span, if any."""
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        event_dict.setdefault("traceID", format(ctx.trace_id, "032x"))
        event_dict.setdefault("spanID", format(ctx.span_id, "016x"))
    return event_dict


def _add_service(service: str) -> Processor:
    def processor(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        event_dict.setdefault("service", service)
        return event_dict

    return processor


def _renderer(fmt: str) -> Processor:
    if fmt == "console":
        return structlog.dev.ConsoleRenderer(colors=False)
    if fmt == "json":
        return structlog.processors.JSONRenderer()
    raise ValueError(f"unknown log format {fmt!r} (want json or console)")


def configure_logging(
    service: str, level: str = "info", fmt: str = "json", *, stream: TextIO | None = None
) -> None:
    """Route structlog and stdlib logging to ``stream`` (default stderr) as JSON or console lines.

    Idempotent: calling it again replaces the previous configuration (handlers on the root logger are
    replaced, not added). ``level`` is one of debug/info/warning/error/critical (case-insensitive).
    """
    numeric = _LEVELS.get(level.lower())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}")
    # Everything that varies per configuration lives in the formatter attached to the root handler.
    common: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        add_trace_context,
        _add_service(service),
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        # structlog calls merge contextvars at call time (see structlog.configure below); stdlib records
        # are formatted synchronously inside the logging call, so the context is still current here.
        foreign_pre_chain=[structlog.stdlib.ExtraAdder(), structlog.contextvars.merge_contextvars],
        processors=[
            *common,
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            _renderer(fmt),
        ],
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: module-level loggers created (or used) before configure_logging() must pick up
        # the configuration made later; costs one dict lookup per call.
        cache_logger_on_first_use=False,
    )


def get_logger(name: str | None = None, **initial: Any) -> structlog.stdlib.BoundLogger:
    """A structlog logger named ``name`` (use ``__name__``), optionally with initial key/values."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name, **initial)
    return logger


@contextmanager
def bind(**kv: Any) -> Iterator[MutableMapping[str, Any]]:
    """Bind key/values to every log line of the current task (and tasks it starts) inside the block.

    Use the standard keys where they apply: ``claim``, ``pod``, ``node``, ``driver``, ``pool``,
    ``device``. Nested blocks add to and override outer ones; leaving a block restores the previous values.
    """
    with structlog.contextvars.bound_contextvars(**kv):
        yield structlog.contextvars.get_contextvars()
