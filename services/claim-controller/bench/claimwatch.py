"""What one ``--shards`` replica pays to watch claims: every claim (before the shard label) against the
labelled claims of the shards it holds plus the unlabelled ones (``ShardedClaims``).

Watchers run as separate processes, side by side during the same churn, so each one's CPU time
(``/proc/<pid>/stat``) is its list + watch + decode + cache work and nothing else:

- ``all``: one informer on every claim (what each replica did before; the holder of shard 0 still
  watches every claim, for the device-taint eviction);
- ``2-of-4``: ``ShardedClaims`` watching shards 1 and 2 of 4 (one of two replicas);
- ``idle``: one informer whose selector matches no claim (what a watcher costs without events).

Both real watchers run the controller's claim handler and indexes (a ``Controller`` holding shards 1 and
2, device-taint eviction off, nothing reconciled: keys are only queued).

The load generator creates ``--claims`` claims labelled as the controller labels them (owner pods
``p-<i>``, 4 shards) plus ``--user-claims`` unlabelled ones, updates each ``--updates`` times (an
annotation: the status writes of a claim's life), then deletes them; it waits until every watcher's cache
is empty. Results are printed as Markdown. No timing is asserted anywhere.

    .venv/bin/python services/claim-controller/bench/claimwatch.py --claims 2000 --updates 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from claim_controller.claimcache import ShardedClaims
from claim_controller.context import BY_OWNER_UID
from claim_controller.controller import Controller
from claim_controller.eviction import BY_POOL, allocated_pools
from claim_controller.ownership import owner_uid
from claim_controller.settings import Settings
from claim_controller.sharding import shard_labels
from draflow_runtime.informer import Informer
from draflow_runtime.kube import NAMESPACES, RESOURCE_CLAIMS, KubeClient
from draflow_testenv.wait import eventually

SHARDS = 4
CLK_TCK = os.sysconf("SC_CLK_TCK")
MODES = ("all", "2-of-4", "idle")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


async def watcher(kubeconfig: str, namespace: str, mode: str, status: Path) -> None:
    """Watch until killed; write ``<cached objects> <events seen>`` to ``status`` every 0.2 s."""
    kube = await KubeClient.from_kubeconfig(kubeconfig)
    events = 0

    def count(*_: Any) -> None:
        nonlocal events
        events += 1

    async with kube:
        settings = Settings(shards=SHARDS, device_taint_eviction=False, http_port=0, nats_url="")
        ctl = Controller(settings, kube, namespace=namespace)
        ctl.held = {1, 2}
        claims: Informer | ShardedClaims = ctl.claims
        if mode == "all":
            claims = Informer(kube, RESOURCE_CLAIMS, namespace,
                              indexers={BY_OWNER_UID: owner_uid, BY_POOL: allocated_pools})
            claims.add_handler(ctl._on_claim)
        elif mode == "idle":
            claims = Informer(kube, RESOURCE_CLAIMS, namespace, "bench/none=1")
        claims.add_handler(count)
        await claims.start()
        if isinstance(claims, ShardedClaims):
            for shard in ctl.held:
                await claims.acquire(shard)
        await claims.wait_synced()
        last = ""
        while True:
            now = f"{len(claims)} {events}"
            if now != last:
                await asyncio.to_thread(status.write_text, now)
                last = now
            await asyncio.sleep(0.2)


def claim(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "labels": labels, "annotations": {"bench/round": "0"}},
            "spec": {"devices": {"requests": [{"name": "gpu",
                                               "exactly": {"deviceClassName": "bench-gpu"}}]}}}


async def gather_limited(jobs: list[Any], limit: int = 32) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(job: Any) -> None:
        async with gate:
            await job

    await asyncio.gather(*(one(j) for j in jobs))


async def run(kube: KubeClient, kubeconfig: str, args: argparse.Namespace) -> dict[str, Any]:
    namespace = f"bench-claimwatch-{os.getpid()}"
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    tmp = Path(tempfile.mkdtemp(prefix="claimwatch-"))
    procs = {}
    for mode in MODES:
        procs[mode] = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--watch", mode, "--namespace", namespace, "--kubeconfig", kubeconfig,
            "--status", str(tmp / mode))

    def state(mode: str) -> tuple[int, int]:
        try:
            cached, events = (tmp / mode).read_text().split()
        except (FileNotFoundError, ValueError):
            return -1, 0
        return int(cached), int(events)

    await eventually(lambda: all(state(m)[0] >= 0 for m in MODES), 300, "every watcher listed", interval=0.2)
    start = {m: _cpu(p.pid) for m, p in procs.items()}
    t0 = time.monotonic()
    names = [(f"p-{i}-gpu", shard_labels(namespace, f"p-{i}", SHARDS)) for i in range(args.claims)]
    names += [(f"user-{i}", {}) for i in range(args.user_claims)]
    await gather_limited([kube.create(RESOURCE_CLAIMS, claim(n, labels), namespace) for n, labels in names])
    for round_ in range(1, args.updates + 1):
        patch = {"metadata": {"annotations": {"bench/round": str(round_)}}}
        await gather_limited([kube.patch(RESOURCE_CLAIMS, n, patch, namespace, patch_type="merge")
                              for n, _ in names])
    await gather_limited([kube.delete(RESOURCE_CLAIMS, n, namespace) for n, _ in names])
    await eventually(lambda: all(state(m)[0] == 0 for m in MODES), 600, "every watcher saw the deletes",
                     interval=0.2)
    await asyncio.sleep(0.5)
    used = {m: _cpu(p.pid) - start[m] for m, p in procs.items()}
    for proc in procs.values():
        proc.kill()
        await proc.wait()
    await kube.delete(NAMESPACES, namespace)
    return {"claims": args.claims, "user_claims": args.user_claims, "updates": args.updates,
            "wall": time.monotonic() - t0, "cpu": used, "events": {m: state(m)[1] for m in MODES},
            "load": os.getloadavg()[0]}


def markdown(r: dict[str, Any]) -> str:
    writes = (r["claims"] + r["user_claims"]) * (r["updates"] + 2)
    rows = [f"| {m} | {r['events'][m]} | {r['cpu'][m]:.2f} s | {r['cpu'][m] / writes * 1e3:.3f} ms |"
            for m in MODES]
    return "\n".join([
        f"### claim watch of one replica ({r['claims']} labelled claims over {SHARDS} shards + "
        f"{r['user_claims']} unlabelled, {r['updates']} updates each, then deleted)",
        "",
        "| watcher | events seen | CPU (list + watch + decode + cache) | CPU per claim write |",
        "|---|---|---|---|",
        *rows,
        "",
        f"Churn {r['wall']:.1f} s, 1-min load average at the end {r['load']:.1f}.",
    ])


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG")
    if kubeconfig:
        async with await KubeClient.from_kubeconfig(kubeconfig) as kube:
            return await run(kube, kubeconfig, args)
    from draflow_testenv.environment import Environment

    async with Environment() as env, await KubeClient.from_kubeconfig(str(env.kubeconfig)) as kube:
        return await run(kube, str(env.kubeconfig), args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--claims", type=int, default=2000, help="labelled claims (default 2000)")
    parser.add_argument("--user-claims", type=int, default=200, help="unlabelled claims (default 200)")
    parser.add_argument("--updates", type=int, default=4, help="updates per claim (default 4)")
    parser.add_argument("--kubeconfig", default=None, help="use this cluster instead of a fresh testenv")
    parser.add_argument("--watch", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    parser.add_argument("--status", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.watch:
        asyncio.run(watcher(args.kubeconfig, args.namespace, args.watch, Path(args.status)))
        return
    print(markdown(asyncio.run(main_async(args))))


if __name__ == "__main__":
    main()
