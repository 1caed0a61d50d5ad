"""The evaluation budget of one selector evaluation, as close to the apiserver's as cel-cpp allows.

Upstream (k8s.io/dynamic-resource-allocation/cel) evaluates a selector with cel-go's runtime cost
limit ``resourceapi.CELSelectorExpressionMaxCost`` = 1,000,000 cost units: the evaluation is cancelled
("operation cancelled: actual cost limit exceeded") and the allocation fails with that error. Here two
meters make up that budget:

* **Comprehensions** (``all``, ``exists``, ``map``, ...): cel-cpp stops an evaluation after
  :data:`ITERATION_LIMIT` loop iterations in total, nested loops included (its
  ``comprehension_max_iterations`` default; cel-expr-python 0.1.3 does not let it be changed) and raises
  ``RuntimeError("INTERNAL: Iteration budget exceeded")``. cel-go charges at least one unit per
  iteration plus its body, so this is stricter for loops with cheap bodies: e.g. three nested
  ``exists`` over a device's attribute map (32 x 32 x 32 iterations) fit upstream and exceed it here.
* **Library functions implemented in Python** (quantity, semver, ``find``, ``findAll``, list and sets
  functions): each call is charged what Kubernetes charges for it (``library/cost.go``, cel-go's
  ``ext`` sets) on the thread's :func:`meter`, which :class:`~.cel_env.CompiledSelector` resets before an
  evaluation. Past :data:`COST_LIMIT` every further charged call fails at once, and the result of
  the evaluation is the cost error, whatever the expression does with the failed calls.

  One difference, so that the limit also bounds time: a Python call is about fifty times slower than
  cel-go's Go call that upstream charges 1 for, so every call is charged :data:`CALL_COST` on top,
  and ``findAll`` :data:`MATCH_COST` per match it returns (upstream charges only by input length).
  1,000,000 units are then at most 20,000 calls or 100,000 matches: about 0.15 s of CPU, where
  upstream's budget would be many seconds of Python. Only an expression making more than ~20,000
  library calls (or finding ~100,000 matches) in one evaluation notices.

Native cel-cpp operations (arithmetic, the strings extension, ``matches``) are not metered. They run at
about cel-go's speed, and the apiserver rejects a selector whose *estimated* cost exceeds the same
1,000,000 (``too complex, exceeds cost limit``), which bounds them for every object it validated: e.g.
``split("")`` of a 4,000-character literal inside 100 x 100 iterations is estimated at 8,051,411 and
rejected there (it would take 4.6 s here); 25 x 25 iterations over 1,000 characters (128,486) pass.

Measured upstream (k8s.io/dynamic-resource-allocation v0.37.1, ``DeviceMatches``): three nested ``all``
over 25-element literal lists cost 143,226 (fits; here it exceeds the iteration limit), ``findAll("x")``
of a 4,000-character literal in 100 iterations 40,601 (fits; here the match charge ends it after 25
calls, 0.16 s). Those are the two kinds of expression that fail here and not upstream.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "CALL_COST",
    "COST_EXCEEDED",
    "COST_LIMIT",
    "ITERATION_LIMIT",
    "MATCH_COST",
    "CostExceeded",
    "charge_matches",
    "is_metered",
    "list_cost",
    "meter",
    "metered",
    "regex_cost",
    "sets_cost",
    "unit_cost",
]

COST_LIMIT = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost
ITERATION_LIMIT = 10_000  # cel-cpp RuntimeOptions.comprehension_max_iterations (default, fixed)
COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"
CALL_COST = 50  # per call of a Python-implemented library function (~7 us each)
MATCH_COST = 10  # per findAll match (~1.5 us each)
_STRING_TRAVERSAL = 0.1  # cel-go common.StringTraversalCostFactor
_REGEX_LENGTH = 0.25  # cel-go common.RegexStringLengthCostFactor


class CostExceeded(Exception):
    """Raised inside a metered function once the evaluation's budget is spent."""


class Meter:
    """Cost charged by metered functions during one evaluation (one event loop, no threads)."""

    __slots__ = ("exceeded", "limit", "spent")

    def __init__(self, limit: int = COST_LIMIT) -> None:
        self.limit = limit
        self.spent = 0
        self.exceeded = False

    def reset(self) -> None:
        self.spent = 0
        self.exceeded = False

    def charge(self, cost: int) -> None:
        if not self.exceeded:
            self.spent += cost
            self.exceeded = self.spent > self.limit
        if self.exceeded:
            raise CostExceeded(COST_EXCEEDED)


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.meter = Meter()


_THREAD = _PerThread()


def meter() -> Meter:
    """The meter of the calling thread (evaluations in different threads never share one)."""
    return _THREAD.meter


def metered(impl: Callable[..., Any], cost: Callable[..., int]) -> Callable[..., Any]:
    """``impl`` charging ``cost(*args)`` to the thread's :func:`meter` before it runs."""

    def call(*args: Any) -> Any:
        _THREAD.meter.charge(CALL_COST + cost(*args))
        return impl(*args)

    call.__name__ = getattr(impl, "__name__", "metered")
    call.draflow_metered = True  # type: ignore[attr-defined]
    return call


def is_metered(fn: Callable[..., Any]) -> bool:
    return bool(getattr(fn, "draflow_metered", False))


def unit_cost(*_: Any) -> int:
    """Any other library call (quantity, semver): 1."""
    return 1


def charge_matches(matches: Iterator[str], limit: int = -1) -> list[str]:
    """``findAll``'s result from its matches, charging :data:`MATCH_COST` for each as it is found."""
    out: list[str] = []
    if limit == 0:
        return out
    for match in matches:
        _THREAD.meter.charge(MATCH_COST)
        out.append(match)
        if len(out) == limit:
            break
    return out


def regex_cost(text: str, pattern: str, *_: Any) -> int:
    """``find``/``findAll``: string traversal x pattern length, as Kubernetes charges them."""
    return math.ceil((1 + len(text)) * _STRING_TRAVERSAL) * math.ceil(len(pattern) * _REGEX_LENGTH)


def _traversal(v: Any) -> int:
    if isinstance(v, str):
        return int(len(v) * _STRING_TRAVERSAL)
    if isinstance(v, list):
        return sum(_traversal(x) for x in v)
    return 1


def list_cost(items: Any, *_: Any) -> int:
    """``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``: one traversal."""
    return _traversal(items) if isinstance(items, list) else 1


def sets_cost(a: Any, b: Any) -> int:
    """``sets.contains``/``equivalent``/``intersects``: every pair compared (cel-go ``ext.Sets``)."""
    return max(1, len(a) * len(b)) if isinstance(a, list) and isinstance(b, list) else 1
