#!/usr/bin/env python3
"""Many more seeds of the allocator's differential check than the test runs (see the allocator README,
"Differential check against upstream"): draflow's allocator core against upstream's (hack/go-alloc-diff).

    .venv/bin/python hack/alloc-diff.py [--seeds 0:20000] [--show 10] [--timeout 10]

Prints the count per outcome / exclusion rule, then the first disagreements (seed and difference);
exits 1 if there are any. Rerun one seed with --seeds N:N+1 --show 1 to see it in full. Scenarios either
side could not search within --timeout seconds are listed as timed out (seed 87204: both sides still
searching after 4 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import time
from pathlib import Path

root = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root / "services" / "structured-allocator" / "tests"))

from diff_kit import Upstream, compare, run_draflow  # noqa: E402
from diff_scenarios import scenario  # noqa: E402

from draflow_testenv.binaries import ensure_binary  # noqa: E402


def main() -> int:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=fmt)
    parser.add_argument("--seeds", default="0:20000", help="first:end (end excluded)")
    parser.add_argument("--show", type=int, default=10, help="disagreements to print")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds each side may search one scenario (upstream's "
                             "DRASchedulerFilterTimeout default); a scenario either side does not finish is "
                             "counted as 'timeout', not compared; 0: no limit (an exponential case then "
                             "stops the run)")
    args = parser.parse_args()
    first, end = (int(x) for x in args.seeds.split(":"))
    upstream = Upstream(asyncio.run(ensure_binary("go-alloc-diff", root)))
    seen: collections.Counter[str] = collections.Counter()
    bad: list[tuple[int, str]] = []
    slow: list[str] = []
    start = time.monotonic()
    try:
        for seed in range(first, end):
            case = scenario(seed)
            if args.timeout > 0:
                case["timeoutSeconds"] = args.timeout
            theirs, ours = upstream.run(case), run_draflow(case)
            agree, why = compare(case, theirs, ours)
            if why == "timeout":
                slow.append(f"{seed} (upstream {theirs['outcome']}, draflow {ours['outcome']})")
            seen[why if agree else "DISAGREE"] += 1
            if not agree:
                bad.append((seed, why))
    finally:
        upstream.close()
    print(f"{end - first} scenarios in {time.monotonic() - start:.1f}s: {dict(seen.most_common())}")
    if slow:
        print("timed out:", ", ".join(slow))
    for seed, why in bad[: args.show]:
        print(f"seed {seed}: {why}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
