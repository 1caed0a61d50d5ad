"""The allocator's web view (``GET /ui``) in a real headless Chromium, during a real ``make up`` run.

``draflow-testenv up``'s steps (the five services, the demo) in an environment of its own (2 simulated
nodes x 8 partitionable GPUs, TLS NATS with a user per service under the deploy's permissions), plus the
README's *Try it* extras (``deploy/demo/extras``: a claim that fits on no node, a pod asking for GPUs
through ``resources.limits``), applied as a user would after ``up``, then Debian's ``chromium``
(``hack/browser-packages.sh``) driven by Playwright's Python package opens the URL
``up`` prints and checks what a person sees: one cell per device the API server lists per node, a
device of the shared claim coloured as allocated, a click on it showing the claim, its three pods and
its JetStream timeline, a generated claim's trace link into Jaeger, the claim that cannot fit listed
with the allocator's reason, a pod created afterwards appearing on the open page, and a device the
driver reports unhealthy and one a DeviceTaintRule taints changing colour. Every wait is on a condition
(Playwright's retrying assertions). It ends with a screenshot: in its temporary directory, or with
``DRAFLOW_UI_SCREENSHOT=docs/images/ui.png`` (``make ui-screenshot``) the picture ``docs/ui.md`` shows —
so a test run leaves the work tree as it was.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, async_playwright, expect

from draflow_runtime.dra import claim_names, claim_results
from draflow_runtime.files import atomic_write
from draflow_runtime.kube import DEVICE_TAINT_RULES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, KubeClient
from draflow_testenv.binaries import repo_root
from draflow_testenv.environment import Environment
from draflow_testenv.flow import DEMO_NAMESPACE, DRIVER, STEPS, UNFIT_CLAIM, apply_demo, demo_extras
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

SCREENSHOT_ENV = "DRAFLOW_UI_SCREENSHOT"  # where the screenshot goes (relative: to the repo root)
WAIT_MS = 60_000  # Playwright's retrying assertions: the longest wait for one condition
ALLOCATED_RGB = "rgb(37, 99, 235)"  # --allocated in page.html


async def chromium() -> str:
    """Debian's chromium, installed by ``hack/browser-packages.sh`` if missing (idempotent, as ``make
    test`` does before the tests)."""
    proc = await asyncio.create_subprocess_exec(str(repo_root() / "hack" / "browser-packages.sh"),
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 0, f"hack/browser-packages.sh failed: {err.decode()[-2000:]}"
    path = shutil.which("chromium")
    assert path, "no chromium on PATH after hack/browser-packages.sh"
    return path


def devices_per_node(slices: list[dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s in slices:
        spec = s["spec"]
        if spec.get("driver") == DRIVER and spec.get("nodeName"):
            out.setdefault(spec["nodeName"], set()).update(d["name"] for d in spec.get("devices") or ())
    return out


def cell(page: Page, node: str, device: str) -> Any:
    return page.locator(f'.cell[data-node="{node}"][data-device="{device}"]')


async def claim_device(kube: KubeClient, name: str) -> tuple[str, str]:
    """(pool, device) of the first result of claim ``name`` of the demo; the pool is named after the node."""
    claim = await kube.get(RESOURCE_CLAIMS, name, namespace=DEMO_NAMESPACE)
    result = claim_results(claim)[0]
    return result["pool"], result["device"]


async def free_devices(kube: KubeClient, node: str) -> list[str]:
    """Whole-GPU devices of ``node`` no claim holds (the API server's view)."""
    slices = (await kube.list(RESOURCE_SLICES)).get("items") or []
    claims = (await kube.list(RESOURCE_CLAIMS)).get("items") or []
    held = {r["device"] for c in claims for r in claim_results(c) if r["pool"] == node}
    return sorted(d for d in devices_per_node(slices).get(node, set()) if "-part-" not in d and d not in held)


async def check_grid_and_detail(page: Page, kube: KubeClient, jaeger_url: str) -> None:
    slices = (await kube.list(RESOURCE_SLICES)).get("items") or []
    for node, names in devices_per_node(slices).items():
        row = page.locator(f'.cell[data-node="{node}"]')
        await expect(row).to_have_count(len(names), timeout=WAIT_MS)
        assert set(await row.evaluate_all("cells => cells.map(c => c.dataset.device)")) == names
    assert len(devices_per_node(slices)) == 2

    # the shared claim's device: coloured as allocated; a click shows the claim, its pods, its timeline
    pool, device = await claim_device(kube, "shared-gpu")
    shared = cell(page, pool, device)
    await expect(shared).to_have_attribute("data-state", "allocated", timeout=WAIT_MS)
    assert await shared.evaluate("c => getComputedStyle(c).backgroundColor") == ALLOCATED_RGB
    await shared.click()
    detail = page.locator("#detail")
    await expect(detail.locator(".device-name")).to_have_text(device, timeout=WAIT_MS)
    await expect(detail.locator(".claim-name")).to_have_text(f"{DEMO_NAMESPACE}/shared-gpu")
    for pod in ("shared-0", "shared-1", "shared-2"):
        await expect(detail.locator(".claim-pods")).to_contain_text(f"{DEMO_NAMESPACE}/{pod}")
    await expect(detail.locator('.timeline tr[data-kind="allocated"]')).not_to_have_count(0, timeout=WAIT_MS)

    # a generated claim's device: the trace link goes to the claim's trace in Jaeger
    pod = await kube.get(PODS, "inference-0", namespace=DEMO_NAMESPACE)
    (generated,) = claim_names(pod)
    claim = await kube.get(RESOURCE_CLAIMS, generated, namespace=DEMO_NAMESPACE)
    trace_id = claim["metadata"]["annotations"]["draflow.dev/traceparent"].split("-")[1]
    pool, device = await claim_device(kube, generated)
    await cell(page, pool, device).click()
    await expect(detail.locator(".claim-name")).to_have_text(f"{DEMO_NAMESPACE}/{generated}", timeout=WAIT_MS)
    await expect(detail.locator("a.trace-link")).to_have_attribute("href", f"{jaeger_url}/trace/{trace_id}")
    await expect(detail.locator('.timeline tr[data-kind="prepared"]')).not_to_have_count(0, timeout=WAIT_MS)

    # the claim that cannot fit (the Try it extras), with the allocator's reason
    unfit = page.locator(f'.pending-claim[data-claim="{DEMO_NAMESPACE}/{UNFIT_CLAIM}"]')
    await expect(unfit).to_contain_text("0/2 nodes are available", timeout=WAIT_MS)
    await expect(unfit).to_contain_text("12 needed")
    # the demo's partitions are in use: their whole GPU (and sibling partitions) say so
    await expect(page.locator('.cell[data-state="partition"]')).not_to_have_count(0)


async def check_live_updates(page: Page, kube: KubeClient, fleet: Path) -> None:
    """A new pod's claim, a device reported unhealthy and a tainted device show up without a reload."""
    template = (await kube.get(PODS, "inference-0", namespace=DEMO_NAMESPACE))
    late = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": DEMO_NAMESPACE},
            "spec": {k: template["spec"][k] for k in ("schedulerName", "resourceClaims", "containers")}}
    await kube.create(PODS, late, namespace=DEMO_NAMESPACE)

    async def allocated() -> str | None:
        pod = await kube.get(PODS, "late", namespace=DEMO_NAMESPACE)
        names = claim_names(pod)
        if not names:
            return None
        claim = await kube.get(RESOURCE_CLAIMS, names[0], namespace=DEMO_NAMESPACE)
        return names[0] if claim_results(claim) else None

    claim = await eventually(allocated, 120, "the late pod's claim allocated")
    pool, device = await claim_device(kube, claim)
    await expect(cell(page, pool, device)).to_have_attribute(
        "data-claims", f"{DEMO_NAMESPACE}/{claim}", timeout=WAIT_MS)
    await expect(cell(page, pool, device)).to_have_attribute("data-state", "allocated")

    node = "sim-1"
    sick, tainted = (await free_devices(kube, node))[:2]
    atomic_write(fleet / node / "state" / "health.json", json.dumps(
        {"devices": {sick: {"health": "Unhealthy", "message": "fell off the bus"}}}).encode())
    await kube.create(DEVICE_TAINT_RULES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "ui-maintenance"},
        "spec": {"deviceSelector": {"driver": DRIVER, "pool": node, "device": tainted},
                 "taint": {"key": "draflow.dev/maintenance", "effect": "NoSchedule"}}})
    await expect(cell(page, node, sick)).to_have_attribute("data-state", "unhealthy", timeout=WAIT_MS)
    await expect(cell(page, node, tainted)).to_have_attribute("data-state", "tainted", timeout=WAIT_MS)


@pytest.mark.timeout(900)
async def test_the_web_view_in_a_real_browser(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    executable = await chromium()
    args = argparse.Namespace(nodes=2, gpus=8, demo_timeout=240.0)
    async with Environment(nodes=2, secure_nats=True) as env, AsyncExitStack() as stack:
        for _, step in STEPS:
            await stack.enter_async_context(step(env, args))
        url = f"{args.allocator_url}/ui"
        assert url in capsys.readouterr().out, "make up prints the web view's URL"
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        stack.push_async_callback(kube.close)
        await apply_demo(kube, demo_extras())  # README *Try it*: the claim that cannot fit, legacy-gpus
        pw = await stack.enter_async_context(async_playwright())
        browser = await pw.chromium.launch(executable_path=executable, headless=True)
        stack.push_async_callback(browser.close)
        page = await browser.new_page(viewport={"width": 1500, "height": 760})
        await page.goto(url)
        await expect(page.locator("#status")).to_have_text("live", timeout=WAIT_MS)

        await check_grid_and_detail(page, kube, env.jaeger_query_url)
        await check_live_updates(page, kube, Path(args.fleet_root))

        pool, device = await claim_device(kube, "shared-gpu")
        await cell(page, pool, device).click()
        await expect(page.locator("#detail .claim-name")).to_have_text(f"{DEMO_NAMESPACE}/shared-gpu",
                                                                       timeout=WAIT_MS)
        await expect(page.locator('#detail .timeline tr[data-kind="reserved"]')).not_to_have_count(0)
        wanted = os.environ.get(SCREENSHOT_ENV)
        path = repo_root() / wanted if wanted else tmp_path / "ui.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(path), full_page=True)
        assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n"), f"{path} is not a PNG"
