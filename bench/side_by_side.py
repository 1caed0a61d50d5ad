"""draflow next to upstream kube-scheduler + kube-controller-manager v1.37.1 on scheduler_perf's DRA
workloads, each stack on a fresh kube-apiserver + etcd (method: bench/README.md).

    .venv/bin/python bench/side_by_side.py [--workloads template stream steady shared celmatch]
        [--stacks draflow upstream upstream+pqh] [--quick | --scale 0.1] [--duration S] [--stall S]
        [--controller-cpus 0[,1...]] [--apiserver-profile DIR] [--py-spy DIR]

Prints one Markdown table per workload (stdout); progress goes to stderr. Numbers are never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sidebyside import report, runner, stacks
from sidebyside.workloads import BY_NAME, WORKLOADS

from draflow_testenv.upstream import ensure_upstream_binaries


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", default=[w.name for w in WORKLOADS], choices=list(BY_NAME))
    p.add_argument("--stacks", nargs="+", default=list(stacks.STACKS), choices=list(stacks.STACKS))
    p.add_argument("--scale", type=float, default=1.0, help="multiply nodes, claims and pods (development)")
    p.add_argument("--quick", action="store_true", help="--scale 0.1")
    p.add_argument("--duration", type=float, default=0.0, help="steady-state window (s)")
    p.add_argument("--stall", type=float, default=180.0, help="give up after S s with no new bound pod")
    p.add_argument("--seed", type=int, default=1, help="of the random nodes of the directly allocated claims")
    p.add_argument("--controller-cpus", type=lambda v: {int(c) for c in v.split(",")}, default=None,
                   help="pin each stack's controllers (draflow's two services, kube-scheduler + "
                        "kube-controller-manager) to these CPUs, as taskset -a; e.g. 0 for one core")
    p.add_argument("--apiserver-profile", type=Path, default=None, metavar="DIR",
                   help="profile kube-apiserver over each measured phase into DIR (pprof chunks, the "
                        "merged top, every request counted; bench/sidebyside/apiprofile.py)")
    p.add_argument("--py-spy", type=Path, default=None, metavar="DIR", dest="py_spy",
                   help="py-spy each of draflow's Python services over each measured phase into DIR "
                        "(raw profiles and a summary of each; bench/sidebyside/pyspy.py)")
    p.add_argument("--loaded", action="store_true", help="say in the output that the machine was loaded")
    return p.parse_args(argv)


async def main_async(args: argparse.Namespace) -> int:
    if any(s != "draflow" for s in args.stacks):
        await ensure_upstream_binaries()  # builds them on first use (hack/binaries.sh)
    scale = 0.1 if args.quick else args.scale
    failed = 0
    for name in args.workloads:
        w = BY_NAME[name].scaled(scale)
        if args.duration:
            w = dataclasses.replace(w, duration=args.duration)
        results = []
        t0 = time.monotonic()
        for stack in args.stacks:
            runner.progress(f"{w.name} on {stack} ...")
            try:
                results.append(await runner.run_one(w, stack, seed=args.seed, stall=args.stall,
                                                     cpus=args.controller_cpus,
                                                     profile_dir=args.apiserver_profile,
                                                     pyspy_dir=args.py_spy))
            except Exception as exc:
                failed += 1
                traceback.print_exc()
                results.append(runner.Result(w.name, stack, note=f"failed: {exc!r}"[:300]))
        print(f"### {w.title}\n")
        print(f"Upstream case: `{w.upstream}`{' (scaled ' + str(scale) + ')' if scale != 1 else ''}. "
              f"Shape: {w.shape}. Each stack on a fresh kube-apiserver + etcd, one after the other "
              f"({time.monotonic() - t0:.0f} s for the three){'; loaded machine' if args.loaded else ''}"
              f"{pinned(args.controller_cpus)}.\n")
        print(report.table(w, results))
        loads = [r.load for r in results if r.load == r.load]
        if loads and max(loads) > (os.cpu_count() or 1):
            print(f"\n**Loaded machine**: load average {min(loads):.1f} to {max(loads):.1f} on "
                  f"{os.cpu_count()} cores when the measurements started (other jobs ran meanwhile); "
                  "every stack shared the machine alike, but absolute numbers are pessimistic and noisy.")
        print(flush=True)
    return 1 if failed else 0


def pinned(cpus: set[int] | None) -> str:
    if cpus is None:
        return ""
    n = len(cpus)
    listed = ",".join(map(str, sorted(cpus)))
    return (f"; each stack's controllers pinned to CPU{'s' if n > 1 else ''} {listed} "
            f"({n} of {os.cpu_count()} cores; API server, etcd, NATS, Jaeger unpinned)")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return asyncio.run(main_async(parse(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
