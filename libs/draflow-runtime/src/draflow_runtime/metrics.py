"""Prometheus collectors that survive a second import.

Every module that defines collectors at import time uses :func:`registered_collector`, so importing the
module twice (test runners, reloads) returns the collector already in the default registry instead of
failing with "Duplicated timeseries".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from prometheus_client import REGISTRY

__all__ = ["registered_collector"]

C = TypeVar("C")


def registered_collector(cls: Callable[..., C], name: str, documentation: str, labelnames: list[str],
                         **kwargs: Any) -> C:
    """Create a prometheus collector in the default registry, or return the one already registered."""
    try:
        return cls(name, documentation, labelnames, **kwargs)
    except ValueError:
        names = REGISTRY._names_to_collectors  # no public lookup exists
        for candidate in (name, f"{name}_total", f"{name}_bucket"):
            if candidate in names:
                return names[candidate]  # type: ignore[return-value]
        raise
