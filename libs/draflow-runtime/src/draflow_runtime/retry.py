"""Waiting before a write is tried again: compare-and-swap conflicts and API throttling (429).

* :func:`conflict_attempts` paces a compare-and-swap loop: the first attempt runs at once, every later
  one after an exponential backoff with full jitter (``uniform(0, min(cap, base * 2**n))``), so writers
  that lost the same race do not all come back in the same millisecond and collide again. client-go's
  ``retry.RetryOnConflict`` does the same with its ``DefaultRetry``/``DefaultBackoff``.
* :func:`throttle_delay` reads how long a 429 asks the client to wait: the ``Retry-After`` header
  (delta-seconds or an HTTP date), else ``Status.details.retryAfterSeconds``, bounded to
  ``[0, THROTTLE_MAX_WAIT]``; ``None`` when the server said nothing (then the caller does not retry
  here, the work queue's backoff does). client-go waits the same way before retrying a throttled request.

``sleep``/``rng`` are seams for tests (record the waits, fix the jitter).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

__all__ = [
    "CONFLICT_BASE_DELAY",
    "CONFLICT_MAX_DELAY",
    "THROTTLE_MAX_WAIT",
    "THROTTLE_RETRIES",
    "conflict_attempts",
    "conflict_delay",
    "throttle_delay",
    "throttle_retry_wait",
]

CONFLICT_BASE_DELAY = 0.01
CONFLICT_MAX_DELAY = 1.0
# A throttled request is retried this many times, each after the server's Retry-After (bounded).
THROTTLE_RETRIES = 3
THROTTLE_MAX_WAIT = 10.0

Sleep = Callable[[float], Awaitable[Any]]


def conflict_delay(retry: int, *, base: float = CONFLICT_BASE_DELAY, cap: float = CONFLICT_MAX_DELAY,
                   rng: random.Random | None = None) -> float:
    """Wait before retry number ``retry`` (1 = the second attempt): full jitter over
    ``[0, min(cap, base * 2**(retry-1))]``."""
    ceiling = min(cap, base * (2.0 ** max(retry - 1, 0)))
    return (rng or random).uniform(0.0, ceiling)


async def conflict_attempts(attempts: int, *, base: float = CONFLICT_BASE_DELAY,
                            cap: float = CONFLICT_MAX_DELAY, sleep: Sleep = asyncio.sleep,
                            rng: random.Random | None = None) -> AsyncIterator[int]:
    """``async for attempt in conflict_attempts(n)``: yields 0..n-1, sleeping
    :func:`conflict_delay` before every attempt but the first. A loop body that returns or breaks
    ends it; one that falls through (after a Conflict) gets the next attempt after the backoff."""
    for attempt in range(attempts):
        if attempt:
            await sleep(conflict_delay(attempt, base=base, cap=cap, rng=rng))
        yield attempt


def throttle_delay(retry_after_header: str | None, details: Mapping[str, Any] | None = None, *,
                   now: float | None = None, max_wait: float = THROTTLE_MAX_WAIT) -> float | None:
    """Seconds a 429 asks to wait, bounded to ``[0, max_wait]``; ``None`` when it did not say.

    ``retry_after_header``: ``Retry-After`` as sent (``"3"``, ``"1.5"`` or an HTTP date, read
    against ``now``, default the wall clock). ``details``: the ``Status.details`` of the body, whose
    ``retryAfterSeconds`` is used when the header is missing or unreadable.
    """
    seconds: float | None = None
    value = (retry_after_header or "").strip()
    if value:
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None and when.tzinfo is not None:
                seconds = when.timestamp() - (time.time() if now is None else now)
        if seconds is not None and seconds != seconds:  # NaN
            seconds = None
    if seconds is None and details:
        raw = details.get("retryAfterSeconds")
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            seconds = float(raw)
    if seconds is None:
        return None
    return min(max(seconds, 0.0), max_wait)


def throttle_retry_wait(status: int, retry_after_header: str | None, details: Mapping[str, Any] | None,
                        attempt: int, *, retries: int = THROTTLE_RETRIES) -> float | None:
    """Seconds to wait before sending a failed request again (attempt ``attempt``, 0 = the first),
    ``None``: do not retry here. Only a 429 is retried: API priority and fairness rejected the request
    before running it, so any verb can be sent again; at most ``retries`` times, each after
    :func:`throttle_delay` (as long as the server asked, bounded), as client-go does."""
    if status != 429 or attempt >= retries:
        return None
    return throttle_delay(retry_after_header, details)
