"""Prototype: the allocator's decision on more than one core, node-partitioned, without a double allocation.

    .venv/bin/python services/structured-allocator/bench/partitioned.py [--nodes 500] [--workers 0,2,4]
        [--scenarios half,full,score-all]

``K`` worker processes each own the nodes ``i % K`` (their slices, their in-use devices, their node usage)
and run the real ``Decider`` over only those nodes, asked for ``ceil(nodes_to_find / K)`` feasible nodes. A
coordinator — the one writer, as the allocator's single decision loop is today — sends each pod to every
worker, takes the best-scored proposal and tells only the owner of the winning node to commit it (assume the
allocation, count the pod's usage); the others drop theirs. A node-local device has exactly one owner and
commits are made one at a time by one process, so no device can be given twice whatever the workers
propose at the same time; the coordinator also checks that invariant on every commit (a repeated device
stops the run). Shared (network-attached) pools cannot be split by node; docs/architecture.md says how the
design handles them.

Workload: upstream scheduler_perf's (``bench/sidebyside/objects.py``: node-local slices of 10 devices, one
request per claim, pack scoring). Scenarios: ``half`` fills half the devices (nodes_to_find 32, the
allocator's default), ``full`` fills all but 10, ``score-all`` fills half with nodes_to_find = every node
(percentageOfNodesToScore 100: the node scan dominates). Workers 0: the single-process ``Decider``.

Printed per run: CPU per placed pod of the coordinator and of each worker, and the throughput bound with one
core per process, ``1 / max(per-pod CPU of any process)``. Process CPU time, not wall time: a loaded machine
inflates it less (it still does: caches are shared). Numbers, not assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing as mp
import sys
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from sidebyside import objects as o

from draflow_runtime.informer import key_of
from structured_allocator.assume import AssumeCache
from structured_allocator.core import CelCache
from structured_allocator.decision import Decider, Placement
from structured_allocator.device_counts import counting_slices
from structured_allocator.nodefit import NodeUsage, PodUsage, pod_demand
from structured_allocator.scoring import Candidate, make_scorer

DEVICES_PER_NODE = 10
NODES_TO_FIND = 32  # the allocator's default (settings.nodes_to_find)


class _Cache:
    def __init__(self, items: dict[str, Any]) -> None:
        self.items = items

    def get(self, key: str) -> Any:
        return self.items.get(key)

    def keys(self) -> list[str]:
        return list(self.items)


class PartitionState:
    """The ClusterState shape the Decider reads, for the nodes ``indices`` only."""

    def __init__(self, indices: list[int]) -> None:
        nodes = {o.node_name(i): o.node(i) for i in indices}
        for i, node in zip(indices, nodes.values(), strict=True):
            node["metadata"]["resourceVersion"] = str(i + 1)
        self.nodes = _Cache(nodes)
        slices = []
        for i in indices:
            s = o.resource_slice(i, DEVICES_PER_NODE)
            s["metadata"].setdefault("resourceVersion", "1")
            slices.append(s)
        self.claims = _Cache({})
        self.assume = AssumeCache()
        self.slices = counting_slices(self.assume.state, slices)  # what ClusterState keeps
        self.device_counts = self.slices.counts
        self.usage = NodeUsage()
        self._classes = {o.CLASS: o.device_class()}
        self._names = sorted(nodes)

    def node_names(self) -> list[str]:
        return self._names

    def classes_by_name(self) -> dict[str, Any]:
        return self._classes

    def pod_group(self, namespace: str, name: str) -> None:
        return None

    def commit(self, pod: dict[str, Any], claim: dict[str, Any], allocation: dict[str, Any],
               node: str) -> None:
        self.assume.observe_claim({**claim, "status": {"allocation": allocation}})
        self.usage.observe(pod["metadata"]["uid"], PodUsage(node, pod_demand(pod)))


class RecordingScorer:
    """The allocator's scorer, remembering each node's score in the last decision (compared across
    workers)."""

    def __init__(self) -> None:
        self.inner = make_scorer("pack")
        self.scores: dict[str, float] = {}

    def score(self, candidate: Candidate) -> float:
        s = self.inner.score(candidate)
        self.scores[candidate.node["metadata"]["name"]] = s
        return s


def pod_and_claim(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = o.pod(f"test-dra-{i}", "draflow")
    pod["metadata"]["namespace"] = "test"
    pod["metadata"]["uid"] = str(uuid.uuid4())
    pod_claim = pod["spec"]["resourceClaims"][0]["name"]
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"c{i}", "namespace": "test", "uid": str(uuid.uuid4()),
                          "annotations": {"resource.kubernetes.io/pod-claim-name": pod_claim},
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                               "name": pod["metadata"]["name"],
                                               "uid": pod["metadata"]["uid"], "controller": True}]},
             "spec": o.claim_spec()}
    pod["status"] = {"resourceClaimStatuses": [{"name": pod_claim, "resourceClaimName": f"c{i}"}]}
    return pod, claim


def _worker(conn: Connection, indices: list[int], nodes_to_find: int) -> None:
    state = PartitionState(indices)
    scorer = RecordingScorer()
    decider = Decider(state, scorer, nodes_to_find, CelCache())  # type: ignore[arg-type]
    conn.send(time.process_time())  # start-up CPU, not counted per pod

    async def serve() -> None:
        proposal = None
        while True:
            msg = conn.recv()
            if msg[0] == "decide":
                _, pod, claim = msg
                state.claims.items[key_of(claim)] = claim
                scorer.scores.clear()
                decision = await decider.decide(pod)
                if isinstance(decision, Placement):
                    allocation = decision.claims[0].allocation
                    proposal = (pod, claim, allocation or {}, decision.node)
                    conn.send((scorer.scores.get(decision.node, 0.0), decision.node, allocation))
                else:
                    proposal = None
                    conn.send(None)
            elif msg[0] == "commit" and proposal is not None:
                state.commit(*proposal)
            elif msg[0] == "drop":
                state.claims.items.pop(key_of(msg[1]), None)
            elif msg[0] == "done":
                conn.send(time.process_time())
                return

    asyncio.run(serve())


def partitioned(nodes: int, pods: int, workers: int, nodes_to_find: int) -> tuple[int, float, list[float]]:
    """(placed, coordinator CPU seconds, each worker's CPU seconds after start-up)."""
    ctx = mp.get_context("fork")
    conns, procs = [], []
    for w in range(workers):
        here, there = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(there, [i for i in range(nodes) if i % workers == w],
                                                  math.ceil(nodes_to_find / workers)))
        proc.start()
        conns.append(here)
        procs.append(proc)
    ready = [c.recv() for c in conns]
    owner = {o.node_name(i): i % workers for i in range(nodes)}
    given: set[tuple[str, str, str]] = set()
    start, placed = time.process_time(), 0
    for i in range(pods):
        pod, claim = pod_and_claim(i)
        for c in conns:
            c.send(("decide", pod, claim))
        proposals = [p for p in (c.recv() for c in conns) if p is not None]
        if not proposals:
            break
        _, node, allocation = max(proposals, key=lambda p: p[0])
        for w, c in enumerate(conns):
            c.send(("commit",) if w == owner[node] else ("drop", claim))
        for r in allocation["devices"]["results"]:
            device = (r["driver"], r["pool"], r["device"])
            if device in given:
                raise SystemExit(f"device {device} given twice")
            given.add(device)
        placed += 1
    coordinator = time.process_time() - start
    for c in conns:
        c.send(("done",))
    cpus = [c.recv() - r for c, r in zip(conns, ready, strict=True)]
    for proc in procs:
        proc.join()
    return placed, coordinator, cpus


def single(nodes: int, pods: int, nodes_to_find: int) -> tuple[int, float]:
    state = PartitionState(list(range(nodes)))
    decider = Decider(state, make_scorer("pack"), nodes_to_find, CelCache())  # type: ignore[arg-type]

    async def run() -> int:
        for i in range(pods):
            pod, claim = pod_and_claim(i)
            state.claims.items[key_of(claim)] = claim
            decision = await decider.decide(pod)
            if not isinstance(decision, Placement):
                return i
            state.commit(pod, claim, decision.claims[0].allocation or {}, decision.node)
        return pods

    start = time.process_time()
    placed = asyncio.run(run())
    return placed, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--workers", default="0,2,4", help="comma-separated; 0 = one process")
    parser.add_argument("--scenarios", default="half,full,score-all")
    args = parser.parse_args()
    devices = args.nodes * DEVICES_PER_NODE
    shapes = {"half": (devices // 2, NODES_TO_FIND), "full": (devices - 10, NODES_TO_FIND),
              "score-all": (devices // 2, args.nodes)}
    print(f"### node-partitioned decisions, {args.nodes} nodes x {DEVICES_PER_NODE} devices\n")
    print("| scenario | pods | processes | coordinator ms/pod | workers ms/pod "
          "| bound pods/s (1 core each) |")
    print("|---|---|---|---|---|---|")
    for scenario in args.scenarios.split(","):
        pods, ntf = shapes[scenario]
        for workers in (int(w) for w in args.workers.split(",")):
            if workers == 0:
                placed, cpu = single(args.nodes, pods, ntf)
                per = 1000 * cpu / pods
                print(f"| {scenario} | {placed}/{pods} | 1 | {per:.2f} | - | {1000 / per:.0f} |", flush=True)
                continue
            placed, coordinator, cpus = partitioned(args.nodes, pods, workers, ntf)
            per = [1000 * c / pods for c in cpus]
            bound = 1000 / max(1000 * coordinator / pods, *per)
            print(f"| {scenario} | {placed}/{pods} | 1 + {workers} | {1000 * coordinator / pods:.2f} | "
                  f"{' / '.join(f'{p:.2f}' for p in per)} | {bound:.0f} |", flush=True)


if __name__ == "__main__":
    main()
