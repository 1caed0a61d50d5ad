"""Benchmark: NodePrepareResources round trips of two reference-driver builds, call by call in turn.

    python services/kubelet-dra-shim/bench/prepare_ab.py --a-pythonpath DIRS [--kubeconfig PATH]
                                                         [--calls 600] [--root /tmp]

On a shared machine two runs one after the other see different loads; here driver A (the sources on
``--a-pythonpath``, e.g. an older checkout's ``src`` directories joined with ``:``) and driver B (this
checkout) serve one node each and the calls alternate between them (A then B, then B then A, ...), so
both see the same load. Per driver, as ``prepare.py`` measures them: NodePrepareResources with the claim
passed in the metadata (as kubelet-dra-shim calls), NodeUnprepareResources of it, and the floor, a
NodeUnprepareResources of an unknown claim (gRPC, the driver's Python, no disk write). Prints a
Markdown table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from prepare import DRIVER, GPUS, make_pods, ms, register, start_driver

from draflow_runtime.kube import DEVICE_CLASSES, NAMESPACES, RESOURCE_CLAIMS, SERVICE_ACCOUNTS, KubeClient
from draflow_runtime.log import configure_logging
from draflow_runtime.passedclaims import claims_metadata
from draflow_testenv.benchkit import cluster, load_note


async def one_call(
    kube: KubeClient, ns: str, plugin: Any, pod: dict[str, Any], out: dict[str, list[float]]
) -> None:
    m, stub = plugin.messages, plugin.stub()
    claim = await kube.get(RESOURCE_CLAIMS, pod["metadata"]["name"], namespace=ns)
    ref = m.Claim(namespace=ns, uid=claim["metadata"]["uid"], name=claim["metadata"]["name"])
    t0 = time.perf_counter()
    resp = await stub.NodePrepareResources(m.NodePrepareResourcesRequest(claims=[ref]), timeout=30,
                                           metadata=claims_metadata([claim]))
    out["prepare"].append(time.perf_counter() - t0)
    assert not resp.claims[ref.uid].error, resp.claims[ref.uid].error
    t0 = time.perf_counter()
    await stub.NodeUnprepareResources(m.NodeUnprepareResourcesRequest(claims=[ref]), timeout=30)
    out["unprepare"].append(time.perf_counter() - t0)
    unknown = m.Claim(namespace=ns, uid=str(uuid.uuid4()), name="unknown")
    t0 = time.perf_counter()
    await stub.NodeUnprepareResources(m.NodeUnprepareResourcesRequest(claims=[unknown]), timeout=30)
    out["floor"].append(time.perf_counter() - t0)


async def run(args: argparse.Namespace) -> str:
    configure_logging("bench", "warning")
    async with cluster(args.kubeconfig) as kubeconfig:
        kube = await KubeClient.from_kubeconfig(kubeconfig)
        ns = f"bench-ab-{uuid.uuid4().hex[:6]}"
        cls = f"bench-{uuid.uuid4().hex[:6]}"
        await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await kube.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                             "metadata": {"name": "default"}}, namespace=ns)
        await kube.create(DEVICE_CLASSES, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                           "metadata": {"name": cls}, "spec": {}})
        roots = {d: Path(tempfile.mkdtemp(prefix=f"shimab-{d}-", dir=args.root)) for d in "AB"}
        env = {"A": {"KUBECONFIG": kubeconfig, "PYTHONPATH": args.a_pythonpath},
               "B": {"KUBECONFIG": kubeconfig}}
        drivers = {d: await start_driver(roots[d], [f"ab-{d.lower()}"], env[d]) for d in "AB"}
        loads = [os.getloadavg()[0]]
        try:
            plugins = {}
            for d in "AB":
                store = await register(roots[d], f"ab-{d.lower()}")
                plugins[d] = store.get(DRIVER)
            pods = {}
            for d in "AB":
                node = f"ab-{d.lower()}"
                places = [(f"{d.lower()}-{i}", node, f"gpu-{i % GPUS}") for i in range(args.calls)]
                pods[d] = await make_pods(kube, ns, cls, places)
            out: dict[str, dict[str, list[float]]] = {d: {"prepare": [], "unprepare": [], "floor": []}
                                                      for d in "AB"}
            for i in range(args.calls):
                for d in ("AB" if i % 2 == 0 else "BA"):
                    await one_call(kube, ns, plugins[d], pods[d][i], out[d])
                if i % 100 == 0:
                    loads.append(os.getloadavg()[0])
            loads.append(os.getloadavg()[0])
            for plugin in plugins.values():
                await plugin.close()
        finally:
            for proc in drivers.values():
                proc.terminate()
                await proc.wait()
            for root in roots.values():
                shutil.rmtree(root, ignore_errors=True)
            await kube.delete(NAMESPACES, ns)
            await kube.delete(DEVICE_CLASSES, cls)
            await kube.close()
    rows = [("NodePrepareResources, claim passed", "prepare"), ("NodeUnprepareResources", "unprepare"),
            ("floor: NodeUnprepareResources of an unknown claim", "floor")]
    lines = [f"Calls alternate A/B; {args.calls} of each kind per driver. A: `{args.a_pythonpath}`; B: this "
             "checkout.", "", "| p50 / p99 | A | B |", "|---|---|---|"]
    lines += [f"| {label} | {ms(out['A'][key])} | {ms(out['B'][key])} |" for label, key in rows]
    return "\n".join([*lines, "", load_note(loads)]).rstrip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a-pythonpath", required=True, help="PYTHONPATH of driver A (':'-joined src dirs)")
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", ""))
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--root", default="/tmp", help="where the two drivers' sockets and files go")
    print(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
