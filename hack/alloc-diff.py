#!/usr/bin/env python3
"""Many more seeds of the allocator's differential check than the test runs (see the allocator README,
"Differential check against upstream"): draflow's allocator core against upstream's (hack/go-alloc-diff).

    .venv/bin/python hack/alloc-diff.py [--seeds 0:20000] [--show 10]

Prints the count per outcome / exclusion rule, then the first disagreements (seed and difference);
exits 1 if there are any. Rerun one seed with --seeds N:N+1 --show 1 to see it in full.
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
    args = parser.parse_args()
    first, end = (int(x) for x in args.seeds.split(":"))
    upstream = Upstream(asyncio.run(ensure_binary("go-alloc-diff", root)))
    seen: collections.Counter[str] = collections.Counter()
    bad: list[tuple[int, str]] = []
    start = time.monotonic()
    try:
        for seed in range(first, end):
            case = scenario(seed)
            agree, why = compare(case, upstream.run(case), run_draflow(case))
            seen[why if agree else "DISAGREE"] += 1
            if not agree:
                bad.append((seed, why))
    finally:
        upstream.close()
    print(f"{end - first} scenarios in {time.monotonic() - start:.1f}s: {dict(seen.most_common())}")
    for seed, why in bad[: args.show]:
        print(f"seed {seed}: {why}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
