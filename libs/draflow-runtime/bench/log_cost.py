"""Cost of one log call: get_logger's short route vs structlog's stdlib route (what get_logger returned
before the short route: ``structlog.stdlib.get_logger`` under the same configure_logging).

Run: ``.venv/bin/python libs/draflow-runtime/bench/log_cost.py [--route both|short|stdlib] [--calls 20000]
[--rounds 7] [--fmt json|console]``. Lines go to the null device through a real file. The info line is the
allocator's ``pod placed`` (three key/values) inside a reconcile's bound context and an active span, as in a
service; the debug call is below the configured level (info). Prints µs a call, median and min of the rounds.
With one ``--route`` it is one side of a whole-process pair (the same calls, for a timer outside).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import structlog
from opentelemetry import trace

from draflow_runtime.log import bind, configure_logging, get_logger

SPAN = trace.NonRecordingSpan(trace.SpanContext(
    trace_id=0x5B8EFFF798038103D269B633813FC60C, span_id=0xEEE19B7EC3C1B174, is_remote=False,
    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
))
ROUTES: dict[str, Callable[..., Any]] = {"short": get_logger, "stdlib": structlog.stdlib.get_logger}


def per_call_us(call: Callable[[], None], calls: int, rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples), min(samples)


def calls(log: Any) -> list[tuple[str, Callable[[], None]]]:
    claims = ["default/job-0-gpu-abcde"]

    def info() -> None:
        log.info("pod placed", pod="default/job-0", node="node-0001", claims=claims)

    def debug() -> None:
        log.debug("reconcile requeued with backoff", retry_in=0.25)

    return [("info line", info), ("debug call below the level", debug)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--route", choices=["both", *ROUTES], default="both")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--fmt", choices=["json", "console"], default="json")
    args = parser.parse_args()
    with open(os.devnull, "w") as sink:
        configure_logging("bench", "info", args.fmt, stream=sink)
        routes = list(ROUTES) if args.route == "both" else [args.route]
        with trace.use_span(SPAN), bind(controller="scheduler", key="default/job-0"):
            for route in routes:
                for what, call in calls(ROUTES[route]("structured_allocator.scheduler")):
                    median, best = per_call_us(call, args.calls, args.rounds)
                    print(f"{route:7s} {what:28s} median {median:7.2f} µs  min {best:7.2f} µs")

if __name__ == "__main__":
    main()
