"""Markdown for the results of one workload: a row per measure, a column per stack, and the ratios."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

from sidebyside.measure import percentile
from sidebyside.runner import Result
from sidebyside.workloads import Workload

# component names per role, draflow first
CONTROLLERS = ("claim-controller", "kube-controller-manager")
SCHEDULERS = ("structured-allocator", "kube-scheduler")
SERVERS = ("kube-apiserver", "etcd")
BUS = ("nats", "jaeger")
HARNESS = ("harness",)  # sidebyside.runner.HARNESS


def _fmt(x: float, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _sum(d: dict[str, float], names: Sequence[str]) -> float:
    vals = [d[n] for n in names if n in d]
    return sum(vals) if vals else float("nan")


def _per_pod_ms(r: Result, names: Sequence[str]) -> float:
    return _sum(r.cpu, names) * 1000 / r.pods if r.pods else float("nan")


def _ratio(a: float, b: float) -> str:
    if any(math.isnan(x) for x in (a, b)) or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def _writes_per_pod(r: Result) -> float:
    return sum(r.writes.values()) / r.pods if r.pods else float("nan")


def breakdown(r: Result, limit: int = 8) -> str:
    """The stack's write requests per placed pod, largest first: ``POST pods/binding 1.00``."""
    if not r.pods:
        return "-"
    parts = []
    for (verb, res, sub), n in Counter(r.writes).most_common(limit):
        parts.append(f"{verb} {res}{'/' + sub if sub else ''} {n / r.pods:.2f}")
    rest = sum(r.writes.values()) - sum(n for _, n in Counter(r.writes).most_common(limit))
    if rest > 0:
        parts.append(f"other {rest / r.pods:.2f}")
    return ", ".join(parts)


def table(w: Workload, results: Sequence[Result]) -> str:
    by = {r.stack: r for r in results}
    cols = [s for s in ("draflow", "upstream", "upstream+pqh") if s in by]
    base = by.get("draflow")
    others = [s for s in cols if s != "draflow"]
    rows: list[tuple[str, Callable[[Result], float], int]] = [
        ("pods/s, scheduler_perf's SchedulingThroughput (mean of 1 s samples)",
         lambda r: r.perf_throughput, 1),
        ("pods/s, first create → last bound" if w.mode == "burst" else "pods/s, bound in the window",
         lambda r: r.pods_per_s, 1),
        ("create → bound p50 (ms)", lambda r: percentile(r.latencies, 0.5) * 1000, 0),
        ("create → bound p99 (ms)", lambda r: percentile(r.latencies, 0.99) * 1000, 0),
        ("controller CPU (s): claim-controller / kube-controller-manager",
         lambda r: _sum(r.cpu, CONTROLLERS), 1),
        ("scheduler CPU (s): structured-allocator / kube-scheduler", lambda r: _sum(r.cpu, SCHEDULERS), 1),
        ("stack CPU per placed pod (ms)", lambda r: _per_pod_ms(r, CONTROLLERS + SCHEDULERS), 1),
        ("kube-apiserver + etcd CPU per placed pod (ms)", lambda r: _per_pod_ms(r, SERVERS), 1),
        ("NATS + Jaeger CPU per placed pod (ms)", lambda r: _per_pod_ms(r, BUS), 1),
        ("this harness CPU per placed pod (ms): pod creators + bound-pod watch",
         lambda r: _per_pod_ms(r, HARNESS), 1),
        ("controller peak RSS (MiB)", lambda r: _sum(r.rss, CONTROLLERS), 0),
        ("scheduler peak RSS (MiB)", lambda r: _sum(r.rss, SCHEDULERS), 0),
        ("kube-apiserver + etcd peak RSS (MiB)", lambda r: _sum(r.rss, SERVERS), 0),
        ("API writes per placed pod (the stack's)", _writes_per_pod, 2),
        ("load average (1 min) when measuring started, 2 cores", lambda r: r.load, 1),
    ]
    head = "| | " + " | ".join(cols) + "".join(f" | draflow / {s}" for s in others if base) + " |"
    ratio_cols = len(others) if base else 0
    out = [head, "|---" * (1 + len(cols) + ratio_cols) + "|"]
    for label, fn, digits in rows:
        vals = {s: fn(by[s]) for s in cols}
        cells = [_fmt(vals[s], digits) for s in cols]
        if base:
            no_ratio = label.startswith("load")
            cells += ["" if no_ratio else _ratio(vals["draflow"], vals[s]) for s in others]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    placed = [f"{by[s].pods}/{by[s].expected}" if w.mode == "burst" else f"{by[s].pods} in "
              f"{by[s].span:.0f} s" for s in cols]
    out.append("| pods bound (measured) | " + " | ".join(placed) + " |" + " |" * ratio_cols)
    out.append("| correctness | " + " | ".join(_verdict(by[s]) for s in cols) + " |"
               + " |" * ratio_cols)
    notes = ["", "Writes per placed pod by request:"]
    notes += [f"- {s}: {breakdown(by[s])}" for s in cols]
    for s in cols:
        if by[s].note.strip():
            notes.append(f"- {s}: {by[s].note.strip()}")
    return "\n".join(out + notes)


def _verdict(r: Result) -> str:
    v = r.verdict
    return (f"{v.summary()} ({v.bound} pods bound, {v.claims_checked} claims, "
            f"{v.devices_allocated} devices)")
