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

Two routes, one line. structlog is configured to hand its event dict to stdlib ``logging`` (a
``LogRecord`` per line, copied once more by the root handler's ``ProcessorFormatter``; a bound logger
assembled per call, even below the level). A :class:`Logger` from :func:`get_logger` takes a shorter route
while the set-up is the one :func:`configure_logging` made (as in a running service): stdlib's level check
of its named logger, then the same processors in the same order and the line written to the root
handler's stream under its lock. Whenever it is not (``structlog.testing.capture_logs`` active, another
structlog configuration, other root handlers, a filter on the logger), it takes the stdlib route as any
structlog logger would, so what tests capture and what such set-ups see is unchanged. Cost of each:
docs/benchmarks.md, "Log line cost".
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import structlog
from opentelemetry import trace
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["Logger", "bind", "configure_logging", "get_logger"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


# The short route of Logger: what the latest configure_logging() set up, compared at every call.
_POSITIONAL = structlog.stdlib.PositionalArgumentsFormatter()
_WRAP = structlog.stdlib.ProcessorFormatter.wrap_for_formatter
_ROOT = logging.getLogger()


@dataclass(frozen=True, slots=True)
class _Route:
    chain: list[Processor]  # the list given to structlog.configure; capture_logs edits it in place
    handler: logging.StreamHandler[TextIO]
    rendering: list[Processor]  # the ProcessorFormatter's processors


_route: _Route | None = None


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
    rendering: list[Processor] = [
        *common,
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        _renderer(fmt),
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        # structlog calls merge contextvars at call time (see structlog.configure below); stdlib records
        # are formatted synchronously inside the logging call, so the context is still current here.
        foreign_pre_chain=[structlog.stdlib.ExtraAdder(), structlog.contextvars.merge_contextvars],
        processors=rendering,
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)

    chain: list[Processor] = [
        structlog.stdlib.filter_by_level,
        structlog.contextvars.merge_contextvars,
        _POSITIONAL,
        _WRAP,
    ]
    structlog.configure(
        processors=chain,
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: module-level loggers created (or used) before configure_logging() must pick up
        # the configuration made later; costs one dict lookup per call.
        cache_logger_on_first_use=False,
    )
    global _route
    _route = _Route(chain, handler, rendering)


def _short_route(std: logging.Logger) -> _Route | None:
    """The route when a call may skip stdlib logging: structlog's processors are configure_logging's,
    untouched (``capture_logs`` replaces their contents), the root logger's only handler is the one it
    installed and neither it nor the named logger has a filter. None: take the stdlib route."""
    route = _route
    if route is None or std.filters:
        return None
    chain = route.chain
    if structlog.get_config()["processors"] is not chain or chain[-1] is not _WRAP:
        return None
    handlers = _ROOT.handlers
    if len(handlers) != 1 or handlers[0] is not route.handler or route.handler.filters:
        return None
    return route


class Logger:
    """What :func:`get_logger` returns: the methods of ``structlog.stdlib.BoundLogger`` the services use,
    each with the same line as that logger would write (see the module docstring for the two routes).

    Unlike a logger of structlog's, a bound one follows a later :func:`configure_logging` too."""

    __slots__ = ("_context", "_name", "_std")

    def __init__(self, name: str | None, context: dict[str, Any]) -> None:
        self._name = name
        self._context = context
        self._std = logging.getLogger(name)

    @property
    def name(self) -> str:
        return self._std.name

    def bind(self, **new_values: Any) -> Logger:
        """A logger with ``new_values`` added to this one's key/values."""
        return Logger(self._name, {**self._context, **new_values})

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> None:
        self._log("debug", logging.DEBUG, event, args, kw)

    def info(self, event: str | None = None, *args: Any, **kw: Any) -> None:
        self._log("info", logging.INFO, event, args, kw)

    def warning(self, event: str | None = None, *args: Any, **kw: Any) -> None:
        self._log("warning", logging.WARNING, event, args, kw)

    def error(self, event: str | None = None, *args: Any, **kw: Any) -> None:
        self._log("error", logging.ERROR, event, args, kw)

    def critical(self, event: str | None = None, *args: Any, **kw: Any) -> None:
        self._log("critical", logging.CRITICAL, event, args, kw)

    def exception(self, event: str | None = None, *args: Any, **kw: Any) -> None:
        """An error line with the exception being handled (``exc_info=True`` unless given)."""
        kw.setdefault("exc_info", True)
        self._log("exception", logging.ERROR, event, args, kw)

    def _log(self, method: str, level: int, event: str | None, args: tuple[Any, ...],
             kw: dict[str, Any]) -> None:
        std = self._std
        route = _short_route(std)
        if route is None:  # the stdlib route: structlog's own logger, under whatever is configured now
            getattr(structlog.stdlib.get_logger(self._name, **self._context), method)(event, *args, **kw)
            return
        handler = route.handler
        if not std.isEnabledFor(level) or level < handler.level:  # filter_by_level, Logger's, Handler's
            return
        # What structlog's BoundLogger and the configured chain build, in the same order ...
        if args:
            kw["positional_args"] = args
        ed: Any = self._context.copy()
        ed.update(kw)
        if event is not None:
            ed["event"] = event
        ed = _POSITIONAL(std, method, structlog.contextvars.merge_contextvars(std, method, ed))
        # ... then what ProcessorFormatter.format does with it, and StreamHandler.emit with the line.
        try:
            ed["_record"] = None  # add_logger_name falls back to the logger's name: the record's name
            ed["_from_structlog"] = True
            for proc in route.rendering:
                ed = proc(std, method, ed)
            line = ed + handler.terminator
            handler.acquire()
            try:
                handler.stream.write(line)
                handler.flush()
            finally:
                handler.release()
        except RecursionError:
            raise
        except Exception:  # as logging.Handler.emit: report on stderr, never fail the caller
            handler.handleError(logging.makeLogRecord({"name": std.name, "msg": event, "levelno": level}))


def get_logger(name: str | None = None, **initial: Any) -> Logger:
    """A logger named ``name`` (use ``__name__``), optionally with initial key/values."""
    return Logger(name, initial)


@contextmanager
def bind(**kv: Any) -> Iterator[MutableMapping[str, Any]]:
    """Bind key/values to every log line of the current task (and tasks it starts) inside the block.

    Use the standard keys where they apply: ``claim``, ``pod``, ``node``, ``driver``, ``pool``,
    ``device``. Nested blocks add to and override outer ones; leaving a block restores the previous values.
    """
    with structlog.contextvars.bound_contextvars(**kv):
        yield structlog.contextvars.get_contextvars()
