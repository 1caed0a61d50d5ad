"""Benchmark: slice-publisher in fleet mode, N simulated nodes x D devices, against a real kube-apiserver.

    python services/slice-publisher/bench/publish.py [--nodes 1000] [--devices 8] [--idle 30]
                                                     [--kubeconfig PATH]   # default: a fresh draflow-testenv

Steps: start the environment (unless ``--kubeconfig``), create the Node objects, start ``reference-driver``
in fleet mode (N nodes under one fleet root) and wait until every registration socket answers; then start
``slice-publisher --fleet-root`` (cold: no slices exist) and measure

- **cold publish**: publisher start → every node's pool is in the API (N slices, N x D devices);
- **steady-state CPU**: the publisher's process CPU time (utime + stime from /proc) over ``--idle``
  seconds with nothing changing, as a percentage of one core;
- the publisher's own counters (slices created/updated/deleted) from its /metrics;
- **driver-gone taint delay**: SIGKILL of the reference-driver fleet process → the
  ``draflow.dev/driver-unavailable`` taint is on every device of a node's pool in the API, per node
  (first / p50 / p90 / max over all nodes) and until every node's pool is tainted. Observed with one
  watch on the managed slices (no polling load; the events are timestamped on arrival). The publisher
  runs with a ``--driver-gone-grace`` far longer than the measurement, so the slices stay (tainted)
  meanwhile.

Prints a Markdown snippet (for docs/benchmarks.md). No pass/fail: numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from draflow_runtime.devicetaints import rule_selects
from draflow_runtime.errors import Gone
from draflow_runtime.kube import DEVICE_TAINT_RULES, NODES, RESOURCE_SLICES, KubeClient
from draflow_testenv.benchkit import cluster, cpu_seconds, load_note, spawn, stop
from draflow_testenv.benchkit import percentile as _pct
from draflow_testenv.benchkit import rss_kib as rss_kib_of
from draflow_testenv.benchkit import service_bin as _bin
from draflow_testenv.servers import free_port

MANAGED = "app.kubernetes.io/managed-by=draflow-slice-publisher"
UNAVAILABLE = "draflow.dev/driver-unavailable"


async def count_published(kube: KubeClient) -> tuple[int, int]:
    slices = devices = 0
    cont = None
    while True:
        page = await kube.list(RESOURCE_SLICES, label_selector=MANAGED, limit=500, continue_=cont)
        for s in page["items"]:
            slices += 1
            devices += len(s["spec"].get("devices") or ())
        cont = page["metadata"].get("continue")
        if not cont:
            return slices, devices


async def metric(port: int, name: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        text = await resp.text()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def _slice_state(obj: dict, rules: dict[str, dict]) -> tuple[str, int, int]:
    """(node, devices, devices carrying the driver-unavailable taint) of one slice: on the device, or
    from a DeviceTaintRule selecting it (as kube-scheduler and structured-allocator apply rules)."""
    devices = obj["spec"].get("devices") or ()
    driver, pool = obj["spec"]["driver"], obj["spec"]["pool"]["name"]
    by_rule = [r for r in rules.values() if r["spec"]["taint"]["key"] == UNAVAILABLE]
    tainted = sum(
        1 for d in devices
        if any(t.get("key") == UNAVAILABLE for t in d.get("taints") or ())
        or any(rule_selects(r, driver, pool, d["name"]) for r in by_rule)
    )
    return obj["spec"].get("nodeName") or "", len(devices), tainted


async def measure_taint_delay(
    kube: KubeClient, driver: asyncio.subprocess.Process, nodes: list[str], limit: float
) -> tuple[dict[str, float], int, int]:
    """SIGKILL ``driver``; seconds from the kill until each node's devices all carry the taint.

    A watch on the managed slices and one on DeviceTaintRules (each started from a list's
    resourceVersion, so nothing is missed; watched again when the server closes it), each event
    timestamped when it arrives. Returns ({node: delay}, tainted devices at the end, rules seen).
    """
    slices: dict[str, tuple[str, int, int]] = {}  # name -> state
    objects: dict[str, dict] = {}  # name -> slice
    rules: dict[str, dict] = {}  # name -> DeviceTaintRule
    by_node: dict[str, set[str]] = {}  # node -> slice names
    listing = await kube.list(RESOURCE_SLICES, label_selector=MANAGED)
    rule_listing = await kube.list(DEVICE_TAINT_RULES)
    rules.update({r["metadata"]["name"]: r for r in rule_listing["items"]})
    for s in listing["items"]:
        objects[s["metadata"]["name"]] = s
        state = slices[s["metadata"]["name"]] = _slice_state(s, rules)
        by_node.setdefault(state[0], set()).add(s["metadata"]["name"])
    wanted = set(nodes)
    done: dict[str, float] = {}
    all_tainted = asyncio.Event()
    t_kill: float | None = None

    def node_tainted(node: str) -> bool:
        states = [slices[name] for name in by_node.get(node, ())]
        return bool(states) and all(n == t for _, n, t in states) and sum(n for _, n, _ in states) > 0

    def seen(obj: dict, now: float) -> None:
        name = obj["metadata"]["name"]
        objects[name] = obj
        state = slices[name] = _slice_state(obj, rules)
        node = state[0]
        by_node.setdefault(node, set()).add(name)
        if t_kill is not None and node in wanted and node not in done and node_tainted(node):
            done[node] = now - t_kill
            if len(done) == len(wanted):
                all_tainted.set()

    async def watch() -> None:
        """Until every node is tainted. The API server closes a watch whose reader falls behind (this
        process starved on a loaded machine): watch again from the last resourceVersion seen, or list
        again if that expired (events then count when the list arrives: pessimistic)."""
        rv = listing["metadata"]["resourceVersion"]
        while not all_tainted.is_set():
            try:
                async for etype, obj in kube.watch(
                    RESOURCE_SLICES, resource_version=rv, label_selector=MANAGED, allow_bookmarks=False
                ):
                    now = time.monotonic()
                    rv = obj.get("metadata", {}).get("resourceVersion") or rv
                    if etype == "DELETED":
                        objects.pop(obj["metadata"]["name"], None)
                        if (old := slices.pop(obj["metadata"]["name"], None)) is not None:
                            by_node[old[0]].discard(obj["metadata"]["name"])
                    else:
                        seen(obj, now)
                    if all_tainted.is_set():
                        return
            except Gone:
                relisted = await kube.list(RESOURCE_SLICES, label_selector=MANAGED)
                now = time.monotonic()
                for obj in relisted["items"]:
                    seen(obj, now)
                rv = relisted["metadata"]["resourceVersion"]

    async def watch_rules() -> None:
        rv = rule_listing["metadata"]["resourceVersion"]
        while not all_tainted.is_set():
            with contextlib.suppress(Gone):
                async for etype, obj in kube.watch(DEVICE_TAINT_RULES, resource_version=rv,
                                                   allow_bookmarks=False):
                    now = time.monotonic()
                    rv = obj.get("metadata", {}).get("resourceVersion") or rv
                    if etype == "DELETED":
                        rules.pop(obj["metadata"]["name"], None)
                        continue
                    rules[obj["metadata"]["name"]] = obj
                    for sl in list(objects.values()):
                        seen(sl, now)
                    if all_tainted.is_set():
                        return
            relisted = await kube.list(DEVICE_TAINT_RULES)
            rules.clear()
            rules.update({r["metadata"]["name"]: r for r in relisted["items"]})
            rv = relisted["metadata"]["resourceVersion"]

    task = asyncio.gather(watch(), watch_rules())
    try:
        await asyncio.sleep(1.0)  # the watch connection is up before the kill
        t_kill = time.monotonic()
        os.kill(driver.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(all_tainted.wait(), limit)
        except TimeoutError:
            raise SystemExit(
                f"driver-unavailable taint on {len(done)}/{len(wanted)} nodes after {limit}s"
            ) from None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await driver.wait()
    unavailable_rules = sum(1 for r in rules.values() if r["spec"]["taint"]["key"] == UNAVAILABLE)
    return done, sum(t for _, _, t in slices.values()), unavailable_rules


async def bench(args: argparse.Namespace, kubeconfig: str, workdir: Path) -> str:
    kube = await KubeClient.from_kubeconfig(kubeconfig)
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    prefix = f"bench-{os.getpid()}-"
    nodes = [f"{prefix}{i}" for i in range(args.nodes)]
    sem = asyncio.Semaphore(32)

    async def make_node(name: str) -> None:
        async with sem:
            await kube.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})

    await asyncio.gather(*(make_node(n) for n in nodes))
    root = workdir / "fleet"
    driver = await spawn(
        [
            _bin("reference-driver"),
            "--node-name-prefix",
            prefix,
            "--node-count",
            str(args.nodes),
            "--fleet-root",
            str(root),
            "--gpu-count",
            str(args.devices),
            "--http-port",
            "0",
            "--nats-url",
            "",
            "--log-level",
            "warning",
        ],
        workdir / "reference-driver.log",
        env,
    )
    publisher = None
    try:
        t0 = time.monotonic()
        while (
            sum(
                1
                for n in nodes
                if (root / n / "plugins_registry").is_dir()
                and any((root / n / "plugins_registry").glob("*-reg.sock"))
            )
            < args.nodes
        ):
            if driver.returncode is not None:
                raise SystemExit(f"reference-driver exited ({driver.returncode}); see {workdir}")
            await asyncio.sleep(0.5)
        driver_ready = time.monotonic() - t0
        await asyncio.sleep(2.0)  # let the driver finish binding its service sockets

        port = free_port()
        t_start = time.monotonic()
        publisher = await spawn(
            [
                _bin("slice-publisher"),
                "--fleet-root",
                str(root),
                "--http-port",
                str(port),
                "--http-host",
                "127.0.0.1",
                "--nats-url",
                "",
                "--startup-grace",
                "30",
                "--driver-gone-grace",  # the driver-gone measurement must not see the slices deleted
                str(max(3600.0, 2 * args.timeout)),
                "--driver-gone-rule-min-pools",
                str(args.rule_min_pools),
                "--log-level",
                "warning",
            ],
            workdir / "slice-publisher.log",
            env,
        )
        want = (args.nodes, args.nodes * args.devices)
        while (have := await count_published(kube)) != want:
            if publisher.returncode is not None:
                raise SystemExit(f"slice-publisher exited ({publisher.returncode}); see {workdir}")
            if time.monotonic() - t_start > args.timeout:
                raise SystemExit(f"not published after {args.timeout}s: have {have}, want {want}")
            await asyncio.sleep(0.2)
        cold = time.monotonic() - t_start
        loads = [os.getloadavg()[0]]
        cpu_cold = cpu_seconds(publisher.pid)

        await asyncio.sleep(5.0)  # let informer echoes of its own writes settle
        c0, w0 = cpu_seconds(publisher.pid), time.monotonic()
        await asyncio.sleep(args.idle)
        idle_cpu = (cpu_seconds(publisher.pid) - c0) / (time.monotonic() - w0) * 100
        created = await metric(port, "draflow_slice_publisher_slices_created_total")
        updated = await metric(port, "draflow_slice_publisher_slices_updated_total")
        deleted = await metric(port, "draflow_slice_publisher_slices_deleted_total")
        rss_kib = rss_kib_of(publisher.pid)

        loads.append(os.getloadavg()[0])
        cpu_before_kill = cpu_seconds(publisher.pid)
        updated_before = await metric(port, "draflow_slice_publisher_slices_updated_total")
        taint_delays, tainted_devices, rules = await measure_taint_delay(kube, driver, nodes, args.timeout)
        cpu_taint = cpu_seconds(publisher.pid) - cpu_before_kill
        taint_slice_writes = (
            await metric(port, "draflow_slice_publisher_slices_updated_total") - updated_before
        )
        loads.append(os.getloadavg()[0])
        if publisher.returncode is not None:
            raise SystemExit(f"slice-publisher exited ({publisher.returncode}); see {workdir}")
        if (have := await count_published(kube)) != want:
            raise SystemExit(f"slices changed during the driver-gone measurement: have {have}, want {want}")
        delays_ms = [d * 1000 for d in taint_delays.values()]
    finally:
        if publisher is not None:
            await stop(publisher, 15.0)
        await stop(driver, 15.0)
        with contextlib.suppress(Exception):
            await kube.delete_collection(RESOURCE_SLICES, label_selector=MANAGED)
        await asyncio.gather(*(kube.delete(NODES, n) for n in nodes), return_exceptions=True)
        await kube.close()

    return "\n".join(
        [
            f"### slice-publisher: {args.nodes} nodes x {args.devices} devices (fleet mode, one process)",
            "",
            "| measure | value |",
            "|---|---|",
            f"| reference-driver fleet ready (all registration sockets) | {driver_ready:.1f} s |",
            f"| cold publish: publisher start → all {args.nodes} pools in the API | {cold:.1f} s |",
            f"| publisher CPU during the cold publish | {cpu_cold:.1f} s |",
            f"| steady-state publisher CPU (idle {args.idle:.0f} s) | {idle_cpu:.2f} % of one core |",
            f"| publisher RSS after publish | {rss_kib / 1024:.0f} MiB |",
            f"| slices created / updated / deleted | {created:.0f} / {updated:.0f} / {deleted:.0f} |",
            "| driver-gone taint per node: driver SIGKILL → all its devices tainted in the API,"
            f" first / p50 / p90 / max over {len(delays_ms)} nodes"
            f" | {min(delays_ms):.0f} / {_pct(delays_ms, 0.5):.0f} / {_pct(delays_ms, 0.9):.0f}"
            f" / {max(delays_ms):.0f} ms |",
            f"| driver-gone taint: driver SIGKILL → all {args.nodes} pools tainted"
            f" ({tainted_devices} devices) | {max(delays_ms):.0f} ms |",
            "| publisher CPU meanwhile (from 1 s before the kill until all pools tainted; one core at most)"
            f" | {cpu_taint:.1f} s |",
            f"| writes for the taint: slice updates / DeviceTaintRules (`--driver-gone-rule-min-pools"
            f" {args.rule_min_pools}`) | {taint_slice_writes:.0f} / {rules} |",
            "",
            f"Machine: {os.cpu_count()} CPUs, shared; kube-apiserver + etcd on the same machine.",
            "",
            load_note(loads),
        ]
    ).rstrip()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle CPU sampling")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--rule-min-pools", type=int, default=100,
                        help="the publisher's --driver-gone-rule-min-pools (0: taint every pool's slices)")
    parser.add_argument("--kubeconfig", default=None, help="use this cluster instead of a fresh testenv")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="sp-bench-"))
    async with cluster(args.kubeconfig) as kubeconfig:
        print(await bench(args, kubeconfig, workdir))
    print(f"\n(logs: {workdir})", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
