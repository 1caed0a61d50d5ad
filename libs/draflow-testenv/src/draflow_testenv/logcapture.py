"""A service's JSON log lines captured in memory, the root logger put back afterwards."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from draflow_runtime.log import configure_logging

__all__ = ["json_logs"]


@contextmanager
def json_logs(service: str, level: str = "debug") -> Iterator[io.StringIO]:
    """``configure_logging(service, level, "json")`` onto a fresh stream, yielded; then the root logger's
    handlers and level as they were."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    configure_logging(service, level, "json", stream=stream)
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
