"""kube-apiserver + etcd CPU per request, by kind of request, on a fresh draflow-testenv.

    .venv/bin/python bench/apicost.py [--requests 400] [--rounds 3]

Each kind is run ``--requests`` times (8 at a time) against its own objects, round after round
(interleaved, so a change in the machine's load hits every kind alike); the CPU the API server and etcd
used in between (``/proc/<pid>/stat``), divided by the requests, is printed per round and the lowest.
Kinds: a GET (no resourceVersion: read from etcd) with the admin client certificate and with a
ServiceAccount token; a
claim's metadata written by JSON merge patch, by PUT of the whole object, and by PUT without
``managedFields`` (each after a GET, which is measured on its own); a pod's
``status.resourceClaimStatuses`` written by server-side apply and by strategic-merge patch; a pod
create. Prints a Markdown table (stdout). Numbers are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sidebyside import objects
from sidebyside.measure import cpu_seconds
from sidebyside.stacks import server_pids

from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient
from draflow_testenv.environment import Environment

NS = "default"
Op = Callable[[int], Awaitable[Any]]


async def token_client(env: Environment) -> KubeClient:
    """A client authenticated as a ServiceAccount bound to cluster-admin (what a deployed service uses)."""
    await env.admin.ensure_service_account(NS, "apicost")
    await env.admin.ensure("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "apicost"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "apicost", "namespace": NS}]})
    return await KubeClient.from_kubeconfig(str(await env.serviceaccount_kubeconfig(NS, "apicost")))


def kinds(cert: KubeClient, token: KubeClient, n: int, round_: int) -> dict[str, Op]:
    def claim(i: int) -> str:
        return f"c-{i}"

    def pod(i: int, kind: str) -> str:
        return f"p-{round_}-{kind}-{i}"

    async def merge_patch(i: int) -> None:
        c = await cert.get(RESOURCE_CLAIMS, claim(i), NS)
        await cert.patch(RESOURCE_CLAIMS, claim(i), {"metadata": {
            "resourceVersion": c["metadata"]["resourceVersion"], "annotations": {"x": str(time.time())}}},
            NS, field_manager="apicost")

    async def put(i: int, strip: bool = False) -> None:
        c = await cert.get(RESOURCE_CLAIMS, claim(i), NS)
        if strip:
            c["metadata"].pop("managedFields", None)
        c["metadata"].setdefault("annotations", {})["x"] = str(time.time())
        await cert.replace(RESOURCE_CLAIMS, c, field_manager="apicost")

    def status(i: int, kind: str) -> dict[str, Any]:
        return {"resourceClaimStatuses": [{"name": "resource", "resourceClaimName": pod(i, kind) + "-c"}]}

    async def create_pods(i: int) -> None:
        for kind in ("apply", "smp"):
            await cert.create(PODS, objects.pod(pod(i, kind), "draflow"), NS)

    async def apply(i: int) -> None:
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod(i, "apply"), "namespace": NS},
                "status": status(i, "apply")}
        await cert.patch(PODS, pod(i, "apply"), body, NS, patch_type="apply", subresource="status",
                         field_manager="apicost", force=True)

    async def smp(i: int) -> None:
        await cert.patch(PODS, pod(i, "smp"), {"status": status(i, "smp")}, NS, patch_type="strategic",
                         subresource="status", field_manager="apicost")

    return {
        "GET claim, client certificate": lambda i: cert.get(RESOURCE_CLAIMS, claim(i), NS),
        "GET claim, ServiceAccount token": lambda i: token.get(RESOURCE_CLAIMS, claim(i), NS),
        "GET + merge PATCH claim metadata (resourceVersion precondition)": merge_patch,
        "GET + PUT claim (whole object)": put,
        "GET + PUT claim without managedFields": lambda i: put(i, strip=True),
        "POST pod (x2: one per next row)": create_pods,
        "APPLY pods/status resourceClaimStatuses": apply,
        "strategic PATCH pods/status resourceClaimStatuses": smp,
    }


async def main_async(args: argparse.Namespace) -> int:
    n = args.requests
    async with Environment() as env:
        cert = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        token = await token_client(env)
        try:
            await env.admin.ensure_service_account(NS, "default")
            pids = server_pids(env)
            for i in range(n):
                c = objects.claim(0)
                c["metadata"]["name"] = f"c-{i}"
                await cert.create(RESOURCE_CLAIMS, c, NS)
            gate = asyncio.Semaphore(8)

            async def one(op: Op, i: int) -> None:
                async with gate:
                    await op(i)

            results: dict[str, list[float]] = {}
            for r in range(args.rounds):
                for name, op in kinds(cert, token, n, r).items():
                    before = cpu_seconds(pids["kube-apiserver"]) + cpu_seconds(pids["etcd"])
                    await asyncio.gather(*(one(op, i) for i in range(n)))
                    used = cpu_seconds(pids["kube-apiserver"]) + cpu_seconds(pids["etcd"]) - before
                    per = 2 * n if name.startswith("POST pod") else n
                    results.setdefault(name, []).append(used / per * 1000)
        finally:
            await cert.close()
            await token.close()
    print(f"| request ({n} per round, 8 at a time) | kube-apiserver + etcd CPU per request (ms), "
          "each round | lowest |\n|---|---|---|")
    for name, values in results.items():
        print(f"| {name} | {' / '.join(f'{v:.2f}' for v in values)} | {min(values):.2f} |")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    return asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
