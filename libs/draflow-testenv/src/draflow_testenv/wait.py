"""Waiting in integration tests: poll the real servers until the state of the world is what a test expects."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T | None]],
    timeout: float = 30.0,  # noqa: ASYNC109 - a deadline for the whole poll, not for one call
    what: str = "",
    *,
    interval: float = 0.05,
) -> T:
    """Poll ``check`` until it returns something truthy and return that; after ``timeout`` seconds raise
    AssertionError naming ``what`` (or ``check``) and the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = await check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}: last={last!r}")
        await asyncio.sleep(interval)
