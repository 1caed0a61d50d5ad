"""``python -m draflow_testenv.chaos [--short] [--nodes N] [--gpus G]``: a bounded chaos run (``make chaos``).
Exit status 1 when an invariant was violated."""

from __future__ import annotations

import argparse
import asyncio
import sys

from .run import Options, main


def cli(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m draflow_testenv.chaos", description=__doc__)
    p.add_argument("--short", action="store_true", help="one fault of each kind, small fleet (~4-5 min)")
    p.add_argument("--nodes", type=int, help="simulated nodes (default 20, --short 4)")
    p.add_argument("--gpus", type=int, help="GPUs per node (default 8, --short 4)")
    args = p.parse_args(argv)
    opts = Options(short=args.short)
    if args.short:
        opts.nodes, opts.gpus, opts.nats_outage, opts.gap = 4, 4, 10.0, 5.0
    opts.nodes = args.nodes or opts.nodes
    opts.gpus = args.gpus or opts.gpus
    violations = asyncio.run(main(opts))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(cli())
