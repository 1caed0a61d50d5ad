"""Run every draflow benchmark and write the results to docs/benchmarks.md.

Each benchmark is a script next to the code it measures (`<member>/bench/*.py`; `bench/` for the comparison
with upstream kube-scheduler + kube-controller-manager, which spans services); this runner only runs them
one after another (they share a 2-core machine, so never in parallel), keeps what each printed, and writes one
Markdown page with the command, the machine and the date. Numbers are never asserted here or in tests.

    python hack/bench.py [--output docs/benchmarks.md] [--quick] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Bench:
    name: str
    title: str
    script: str
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()


BENCHES = (
    Bench(
        "decode",
        "Decode cost of a ~1 MB ResourceSliceList (runtime)",
        "libs/draflow-runtime/bench/decode_cost.py",
    ),
    Bench(
        "cel",
        "CEL selector evaluation (structured-allocator core)",
        "services/structured-allocator/bench/cel_eval.py",
    ),
    Bench(
        "scheduler",
        "SchedulingWithResourceClaimTemplate, scheduler_perf style (structured-allocator)",
        "services/structured-allocator/bench/scheduler_perf.py",
        ("--nodes", "500", "--devices-per-node", "10", "--pods", "5000"),
        (
            "--nodes",
            "50",
            "--devices-per-node",
            "10",
            "--pods",
            "300",
            "--memory-nodes",
            "500,5000",
            "--memory-pods",
            "1000",
        ),
    ),
    Bench(
        "pathological",
        "A pathological DeviceClass selector does not delay other pods (structured-allocator)",
        "services/structured-allocator/bench/pathological.py",
        (),
        ("--pods", "12"),
    ),
    Bench(
        "partitioned",
        "The decision on more than one core: node-partitioned prototype (structured-allocator)",
        "services/structured-allocator/bench/partitioned.py",
        (),
        ("--nodes", "100", "--workers", "0,2"),
    ),
    Bench(
        "claims",
        "Claim creation under pod churn (claim-controller)",
        "services/claim-controller/bench/churn.py",
        (),
        ("--pods", "300"),
    ),
    Bench(
        "claims-replicas",
        "Claim churn with two claim-controller replicas sharing the work (claim-controller --shards)",
        "services/claim-controller/bench/churn.py",
        ("--pods", "1000", "--batch", "200", "--allocate", "--replicas", "2"),
        ("--pods", "200", "--batch", "100", "--allocate", "--replicas", "2"),
    ),
    Bench(
        "prepare",
        "NodePrepareResources over the unix socket (kubelet-dra-shim + reference-driver)",
        "services/kubelet-dra-shim/bench/prepare.py",
        (),
        ("--calls", "100", "--pods", "50", "--fleet-nodes", "20"),
    ),
    Bench(
        "shim-fleet",
        "1,000 simulated nodes in one kubelet-dra-shim (memory per node, prepare latency at that scale)",
        "services/kubelet-dra-shim/bench/fleet.py",
        (),
        ("--nodes", "100", "--pods", "50", "--idle", "5"),
    ),
    Bench(
        "publish",
        "Publishing ResourceSlices for a fleet (slice-publisher + reference-driver)",
        "services/slice-publisher/bench/publish.py",
        (),
        ("--nodes", "100"),
    ),
    # draflow next to upstream kube-scheduler + kube-controller-manager (bench/README.md), a section each
    *(
        Bench(
            f"upstream-{name}",
            f"Side by side with upstream: {title}",
            "bench/side_by_side.py",
            ("--workloads", name),
            ("--workloads", name, "--quick"),
        )
        for name, title in (
            ("template", "SchedulingWithResourceClaimTemplate 5000pods_500nodes"),
            ("stream", "SchedulingWithResourceClaimTemplate, 5000 pods filling 500 empty nodes"),
            ("steady", "SteadyStateClusterResourceClaimTemplate half_500nodes"),
            ("shared", "SchedulingWithResourceClaim (shared claims) 5000pods_500nodes"),
            ("celmatch", "CEL selector + matchAttribute, steady state on 500 empty nodes"),
        )
    ),
    # each stack's controllers on one core, then on two (taskset -a; API server and etcd unpinned)
    *(
        Bench(
            f"upstream-template-{label}",
            f"Side by side with upstream, controllers on {label}: "
            "SchedulingWithResourceClaimTemplate, scaled 0.4",
            "bench/side_by_side.py",
            ("--workloads", "template", "--scale", "0.4", "--controller-cpus", cpus),
            ("--workloads", "template", "--quick", "--controller-cpus", cpus),
        )
        for label, cpus in (("1core", "0"), ("2cores", "0,1"))
    ),
)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    system = f"{platform.system()} {platform.release()}"
    return f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB, {system}, Python {platform.python_version()}"


def revision() -> str:
    """The checkout measured: its short commit, ``+changes`` when the work tree differs from it."""
    def git(*argv: str) -> str:
        proc = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown commit"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/benchmarks.md")
    return head + ("+changes" if dirty else "")


def run(bench: Bench, quick: bool) -> tuple[str, str, float, int]:
    argv = [sys.executable, bench.script, *(bench.quick_args if quick else bench.args)]
    shown = " ".join(["python", *argv[1:]])
    print(f"[bench] {bench.name}: {shown}", file=sys.stderr, flush=True)
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    took = time.monotonic() - start
    out = proc.stdout.strip()
    if proc.returncode != 0:
        out = f"{out}\n\nFAILED (exit {proc.returncode}):\n{proc.stderr.strip()[-2000:]}"
    return shown, out, took, proc.returncode


HAND = "By hand: "  # title prefix of sections measured by hand (before/after comparisons): kept as they are


def hand_sections(previous: str) -> list[str]:
    """The previous page's sections measured by hand: no benchmark here rewrites them."""
    chunks = ["## " + chunk.rstrip() + "\n" for chunk in previous.split("\n## ")[1:]]
    return [c for c in chunks if c.startswith("## " + HAND)]


def merge_sections(previous: str, chosen: list[Bench], fresh: list[str]) -> list[str]:
    """With --only: keep the previous page's other sections, in BENCHES order, and replace the chosen ones."""
    old: dict[str, str] = {}
    for chunk in previous.split("\n## ")[1:]:
        title = chunk.split("\n", 1)[0].strip()
        old[title] = "## " + chunk.rstrip() + "\n"
    new = {bench.title: text for bench, text in zip(chosen, fresh, strict=True)}
    return [new.get(b.title) or old[b.title] for b in BENCHES if b.title in new or b.title in old]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", default="docs/benchmarks.md")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a quick look")
    parser.add_argument(
        "--only", nargs="*", default=None, help="names: " + ", ".join(b.name for b in BENCHES)
    )
    args = parser.parse_args()
    chosen = [b for b in BENCHES if args.only is None or b.name in args.only]

    sections = []
    failed = 0
    commit = revision()
    for bench in chosen:
        if not (ROOT / bench.script).exists():
            sections.append(f"## {bench.title}\n\nNot run: `{bench.script}` does not exist yet.\n")
            continue
        shown, out, took, rc = run(bench, args.quick)
        failed += rc != 0
        body = out if out.lstrip().startswith(("|", "#", "-")) else f"```\n{out}\n```"
        when = f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
        sections.append(f"## {bench.title}\n\nCommand: `{shown}` ({took:.0f} s, measured {when} at {commit})"
                        f"\n\n{body}\n")

    out_path = ROOT / args.output
    previous = out_path.read_text() if out_path.exists() else ""
    if args.only is not None and previous:
        sections = merge_sections(previous, chosen, sections)
    sections += hand_sections(previous)
    header = (
        "# draflow benchmarks\n\n"
        "Written by `make bench` (hack/bench.py; `--only NAME` re-runs one section); each section says\n"
        "its command and when it was measured (`--quick` in it: `make bench QUICK=1`, small sizes).\n\n"
        f"Machine: {machine()}.\n\n"
        "Each benchmark runs against the real servers started by draflow-testenv on loopback unless it says\n"
        "otherwise. Numbers from a shared or loaded machine are pessimistic: rerun `make bench`.\n"
        f"Sections titled \"{HAND}...\" are before/after comparisons measured by hand; `make bench`\n"
        "keeps them.\n\n"
    )
    out_path.write_text(header + "\n".join(sections))
    print(f"[bench] wrote {out_path}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
