"""kubectl conventions against the real kube-apiserver: ``-o json`` of status and describe node,
``explain pod/...``, the allocator found through the API server's pod proxy, and ``kubectl draflow``
through the real kubectl binary (a plugin found on PATH)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from cli_fixtures import allocated_claim, resource_slice

from draflow_cli.__main__ import parser, run
from draflow_runtime.errors import TransportError
from draflow_runtime.kube import PODS, RESOURCE_SLICES, KubeClient
from draflow_testenv.binaries import ensure_binary

pytestmark = pytest.mark.integration

def cli(testenv: Any, *argv: str) -> Any:
    return parser().parse_args([*argv, "--kubeconfig", str(testenv.kubeconfig)])


async def pod_using(kube: KubeClient, ns: str, name: str, claims: dict[str, str], **status: Any) -> None:
    await kube.create(PODS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": status.pop("labels", {})},
        "spec": {
            "resourceClaims": [{"name": k, "resourceClaimName": v} for k, v in claims.items()],
            "containers": [{"name": "c", "image": "busybox", "ports": status.pop("ports", []),
                            "resources": {"claims": [{"name": k} for k in claims]}}],
        },
    }, namespace=ns)
    if status:
        await kube.patch(PODS, name, {"status": status}, namespace=ns, patch_type="strategic",
                         subresource="status")


async def test_status_and_describe_node_as_json_with_real_slices_claims_and_pods(
    testenv: Any, kube: KubeClient, make_namespace: Any, driver: str
) -> None:
    ns = await make_namespace("cli-describe")
    node = f"node-{uuid.uuid4().hex[:6]}"
    await kube.create(RESOURCE_SLICES, resource_slice(driver, node, [
        {"name": "gpu-0"},
        {"name": "gpu-1",
         "taints": [{"key": "draflow.dev/unhealthy", "value": "ecc", "effect": "NoSchedule"}]},
    ]))
    await allocated_claim(kube, ns, "one", driver, node, "gpu-0")
    await pod_using(kube, ns, "trainer", {"gpu": "one"})

    doc = json.loads(await run(cli(testenv, "status", "-o", "json")))
    (pool,) = [p for p in doc["pools"] if p["driver"] == driver]
    counts = (pool["node"], pool["devices"], pool["allocated"], pool["tainted"], pool["free"])
    assert counts == (node, 2, 1, 1, 0)
    assert pool["allocatedDevices"] == ["gpu-0"] and pool["unhealthyDevices"] == ["gpu-1"]

    view = json.loads(await run(cli(testenv, "describe", "node", node, "-o", "json")))
    assert view["nodeObject"] is False
    assert [s["name"] for s in view["slices"]] == [f"{node}-{driver.split('.')[0]}"]
    assert [(d["device"], d["taints"], d["claim"]) for d in view["devices"]] == [
        ("gpu-0", [], f"{ns}/one"), ("gpu-1", ["draflow.dev/unhealthy=ecc:NoSchedule"], "")]
    assert view["claims"] == [{"claim": f"{ns}/one", "devices": [f"{driver}/{node}/gpu-0"],
                               "pods": [f"{ns}/trainer"]}]
    table = await run(cli(testenv, "describe", "node", node))
    assert f"{ns}/one" in table and f"{ns}/trainer" in table

    with pytest.raises(LookupError, match="no Node, no ResourceSlices"):
        await run(cli(testenv, "describe", "node", f"absent-{uuid.uuid4().hex[:6]}"))


async def test_explain_pod_explains_each_of_its_claims(
    testenv: Any, kube: KubeClient, make_namespace: Any, driver: str
) -> None:
    ns = await make_namespace("cli-explain-pod")
    await allocated_claim(kube, ns, "done", driver, "node-a", "gpu-1")
    await allocated_claim(kube, ns, "stuck", driver, "", "")
    await pod_using(kube, ns, "trainer", {"a": "done", "b": "stuck"})

    out = await run(cli(testenv, "explain", "pod/trainer", "-n", ns))
    assert out.startswith(f"pod {ns}/trainer: 2 claim(s)")
    assert f"--- a\nclaim {ns}/done: allocated on node node-a" in out
    assert f"--- b\nclaim {ns}/stuck: not allocated" in out
    doc = json.loads(await run(cli(testenv, "explain", "--pod", f"{ns}/trainer", "-o", "json")))
    assert [(c["podClaim"], c["claim"], c["allocated"]) for c in doc["claims"]] == [
        ("a", f"{ns}/done", True), ("b", f"{ns}/stuck", False)]
    assert doc["claims"][1]["pods"][0]["pod"] == f"{ns}/trainer"


def host_ip() -> str:
    """An address of this machine the API server may proxy to (it refuses loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.254", 9))  # no packet is sent: picks the outgoing interface
        return str(s.getsockname()[0])


async def test_explain_finds_the_allocator_pod_through_the_api_servers_proxy(
    testenv: Any, kube: KubeClient, make_namespace: Any
) -> None:
    ns = await make_namespace("cli-proxy")
    await allocated_claim(kube, ns, "stuck", "", "", "")
    asked: list[str] = []

    async def explain(request: web.Request) -> web.Response:  # the allocator's /explain route
        asked.append(request.path)
        return web.json_response({"claim": f"{ns}/stuck", "message": "0/3 nodes: devices did not fit"})

    app = web.Application()
    app.router.add_get("/explain/{namespace}/{name}", explain)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "0.0.0.0", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        await pod_using(kube, ns, "allocator", {}, labels={"app.kubernetes.io/name": "structured-allocator"},
                        ports=[{"name": "http", "containerPort": port}],
                        phase="Running", podIP=host_ip(), podIPs=[{"ip": host_ip()}])
        out = await run(cli(testenv, "explain", "stuck", "-n", ns))
        assert out.startswith(f"claim {ns}/stuck") and "0/3 nodes: devices did not fit" in out
        assert asked == [f"/explain/{ns}/stuck"]
        doc = json.loads(await run(cli(testenv, "explain", f"{ns}/stuck", "-o", "json")))
        assert doc["allocator"] == f"pod {ns}/allocator:{port} via the API server"
    finally:
        await runner.cleanup()


async def test_kubectl_draflow_runs_the_plugin_through_the_real_kubectl(
    testenv: Any, kube: KubeClient, driver: str
) -> None:
    node = f"node-{uuid.uuid4().hex[:6]}"
    await kube.create(RESOURCE_SLICES, resource_slice(driver, node, [{"name": "gpu-0"}]))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    env.pop("KUBECONFIG", None)
    kubeconfig = str(testenv.kubeconfig)
    kubectl_binary = await ensure_binary("kubectl")  # the pinned v1.37.1 (make binaries-node caches it)

    async def kubectl(*argv: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            str(kubectl_binary), *argv, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, stderr.decode()
        return stdout.decode()

    assert f"{Path(sys.executable).parent}/kubectl-draflow" in await kubectl("plugin", "list")
    doc = json.loads(await kubectl("draflow", "status", "-o", "json", "--kubeconfig", kubeconfig))
    mine = [(p["node"], p["devices"], p["free"]) for p in doc["pools"] if p["driver"] == driver]
    assert mine == [(node, 1, 1)]
    text = await kubectl("draflow", "describe", "node", node, "--kubeconfig", kubeconfig)
    assert text.startswith(f"Node: {node} (no Node object)") and "gpu-0" in text


async def test_context_flag_picks_the_kubeconfig_context_and_its_namespace(
    testenv: Any, kube: KubeClient, make_namespace: Any, driver: str, tmp_path: Path
) -> None:
    ns = await make_namespace("cli-context")
    await allocated_claim(kube, ns, "done", driver, "node-a", "gpu-0")
    config = yaml.safe_load(testenv.kubeconfig.read_text())
    (real,) = config["contexts"]
    cluster = dict(config["clusters"][0], name="nowhere")
    cluster["cluster"] = dict(cluster["cluster"], server="https://127.0.0.1:9")  # nothing listens there
    config["clusters"].append(cluster)
    config["contexts"] = [
        {"name": "broken", "context": dict(real["context"], cluster="nowhere")},
        {"name": "team", "context": dict(real["context"], namespace=ns)},
    ]
    config["current-context"] = "broken"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))

    # the claim by name only: the namespace comes from the "team" context
    out = await run(parser().parse_args(["explain", "done", "--kubeconfig", str(path), "--context", "team"]))
    assert out.startswith(f"claim {ns}/done: allocated on node node-a")
    with pytest.raises(TransportError):  # the current context's server: nothing listens
        await run(parser().parse_args(["explain", "done", "-n", ns, "--kubeconfig", str(path)]))
