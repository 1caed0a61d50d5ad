"""Waiting in tests: poll the state of the world instead of sleeping a fixed time.

- ``eventually(check, timeout)``: until ``check`` holds (returns something truthy); fails after ``timeout``,
  or at once when the optional ``abort`` check fails (a process under test died).
- ``consistently(check, duration)``: ``check`` holds for the whole of ``duration``; fails the moment it does
  not, saying what it saw and when. This is how a test gives a wrong write the chance to happen: instead of
  ``await asyncio.sleep(1.5)`` and one assertion after, the assertion is polled through the window, so the
  wrong write fails the test when it lands (and an assertion made after a sleep cannot miss a write that
  was undone before it looked).
- ``quiesce(probe, quiet, timeout)``: until what ``probe`` returns (a snapshot: resourceVersions, a counter,
  a list of messages) has not changed for ``quiet`` seconds; returns that settled snapshot. Fails when
  writes keep coming past ``timeout``. ``resource_versions`` makes such a probe for objects of one kind.
- ``gone(kube, resource, name)``: a check for ``eventually``: the object is gone from the API server.

A check or probe may be a plain function or a coroutine function. A check "holds" when it returns something
truthy; an ``AssertionError`` it raises counts as "does not hold" (so a check may be a block of asserts).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from draflow_runtime.errors import NotFound

Check = Callable[[], Any]  # returns a value or an awaitable of one


async def _call(check: Callable[[], Any]) -> Any:
    value = check()
    if inspect.isawaitable(value):
        value = await value
    return value


def _name(what: str, check: Callable[..., Any]) -> str:
    return what or getattr(check, "__name__", repr(check))


async def eventually(
    check: Check,
    timeout: float = 30.0,  # noqa: ASYNC109 - a deadline for the whole poll, not for one call
    what: str = "",
    *,
    interval: float = 0.05,
    abort: Check | None = None,
) -> Any:
    """Poll ``check`` until it returns something truthy and return that; after ``timeout`` seconds raise
    AssertionError naming ``what`` (or ``check``) and the last value seen (or the last AssertionError the
    check raised).

    ``abort`` (e.g. "every process under test is still running") is called before each poll; an
    AssertionError it raises fails the wait at once instead of counting as "not yet"."""
    deadline = time.monotonic() + timeout
    while True:
        if abort is not None:
            await _call(abort)
        failed: AssertionError | None = None
        try:
            last = await _call(check)
        except AssertionError as exc:
            last, failed = None, exc
        if last:
            return last
        if time.monotonic() > deadline:
            seen = f"last check failed: {failed}" if failed else f"last={last!r}"
            raise AssertionError(f"timed out after {timeout}s waiting for {_name(what, check)}: {seen}") \
                from failed
        await asyncio.sleep(interval)


async def consistently(
    check: Check,
    duration: float = 1.0,
    what: str = "",
    *,
    interval: float = 0.05,
) -> None:
    """Poll ``check`` for ``duration`` seconds (first at once, last at the end of the window); the first time
    it returns something falsy or raises AssertionError, raise AssertionError naming ``what`` (or ``check``),
    what it returned (or the assertion's message) and how far into the window that was."""
    start = time.monotonic()
    end = start + duration
    while True:
        now = time.monotonic()
        try:
            value = await _call(check)
        except AssertionError as exc:
            raise AssertionError(
                f"{_name(what, check)} stopped holding {now - start:.2f}s into {duration}s: {exc}"
            ) from exc
        if not value:
            raise AssertionError(
                f"{_name(what, check)} stopped holding {now - start:.2f}s into {duration}s: got {value!r}"
            )
        if now >= end:
            return
        await asyncio.sleep(max(0.0, min(interval, end - time.monotonic())))


async def quiesce(
    probe: Check,
    quiet: float = 0.5,
    timeout: float = 30.0,  # noqa: ASYNC109 - a deadline for the whole wait, not for one call
    what: str = "",
    *,
    interval: float = 0.05,
) -> Any:
    """Poll ``probe`` (a snapshot of what is watched, compared with ``==``) until its value has stayed the
    same for ``quiet`` seconds, and return that value. If it is still changing after ``timeout`` seconds,
    raise AssertionError naming ``what`` (or ``probe``), how often it changed and the last two values."""
    start = time.monotonic()
    deadline = start + timeout
    value: Any = await _call(probe)
    since = start
    changes = 0
    previous: Any = value
    while True:
        await asyncio.sleep(interval)
        now = time.monotonic()
        current = await _call(probe)
        if current != value:
            previous, value, since = value, current, now
            changes += 1
        elif now - since >= quiet:
            return value
        if now > deadline:
            raise AssertionError(
                f"{_name(what, probe)} did not stay unchanged for {quiet}s within {timeout}s: "
                f"{changes} changes, last {previous!r} -> {value!r}"
            )


def resource_versions(
    kube: Any, resource: Any, *, namespace: str | None = None, **selectors: str
) -> Callable[[], Awaitable[dict[str, str]]]:
    """A probe for ``quiesce``/``consistently``: ``{name: resourceVersion}`` of the objects of ``resource``
    (a ``draflow_runtime.kube`` resource) in ``namespace``, narrowed by ``label_selector=``/
    ``field_selector=``. Any create, update or delete among them changes its value."""

    async def probe() -> dict[str, str]:
        listed = await kube.list(resource, namespace=namespace, **selectors)
        return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]}

    return probe


def gone(kube: Any, resource: Any, name: str, namespace: str | None = None) -> Callable[[], Awaitable[bool]]:
    """A check for ``eventually``: the object ``name`` of ``resource`` (a ``draflow_runtime.kube`` resource)
    in ``namespace`` is gone from the API server (a GET answers NotFound)."""

    async def check() -> bool:
        try:
            await kube.get(resource, name, namespace=namespace)
        except NotFound:
            return True
        return False

    return check
