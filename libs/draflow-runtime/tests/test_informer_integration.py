"""Informer against the real kube-apiserver + etcd: events, and convergence after a real 410 Gone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from draflow_runtime.errors import Gone
from draflow_runtime.informer import Informer, key_of
from draflow_runtime.kube import RESOURCE_SLICES, KubeClient
from draflow_testenv.environment import Environment
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration

DRIVER = "informer-test.draflow.dev"


def resource_slice(name: str, run: str, devices: int = 1, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"dev-{i}"} for i in range(devices)],
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "labels": {"draflow.dev/test-run": run}},
        "spec": spec,
    }


class Observed:
    """Rebuilds the state of the world from handler calls alone, and notes every inconsistency."""

    def __init__(self) -> None:
        self.state: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[str, str]] = []
        self.problems: list[str] = []

    def __call__(self, event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        key = key_of(new if new is not None else old)  # type: ignore[arg-type]
        self.events.append((event, key))
        if event == "add":
            if key in self.state:
                self.problems.append(f"{key} added twice")
            self.state[key] = new  # type: ignore[assignment]
        elif event == "update":
            if key not in self.state:
                self.problems.append(f"{key} updated before being added")
            elif old is not self.state[key]:
                self.problems.append(f"{key} update's old object is not the last one announced")
            self.state[key] = new  # type: ignore[assignment]
        else:
            if key not in self.state:
                self.problems.append(f"{key} deleted but never added")
            self.state.pop(key, None)

    def versions(self) -> dict[str, str]:
        return {k: o["metadata"]["resourceVersion"] for k, o in self.state.items()}


async def api_versions(kube: KubeClient, run: str) -> dict[str, str]:
    listed = await kube.list(RESOURCE_SLICES, label_selector=f"draflow.dev/test-run={run}")
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]}


@pytest.fixture
def run_label() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
async def cleanup_slices(kube: KubeClient, run_label: str):
    yield
    await kube.delete_collection(RESOURCE_SLICES, label_selector=f"draflow.dev/test-run={run_label}")


async def test_informer_sees_create_update_delete_of_a_resource_slice(
    kube: KubeClient, run_label: str, cleanup_slices: None
) -> None:
    existing = await kube.create(RESOURCE_SLICES, resource_slice(f"pre-{run_label}", run_label))
    informer = Informer(
        kube, RESOURCE_SLICES, label_selector=f"draflow.dev/test-run={run_label}",
        indexers={"byDriver": lambda o: [o["spec"]["driver"]]}, name="slices",
    )
    observed = Observed()
    informer.add_handler(observed)
    await informer.start()
    try:
        async with asyncio.timeout(30):
            await informer.wait_synced()
        assert informer.keys() == [existing["metadata"]["name"]]
        assert informer.get(existing["metadata"]["name"])["kind"] == "ResourceSlice"

        name = f"s-{run_label}"
        created = await kube.create(RESOURCE_SLICES, resource_slice(name, run_label))
        await eventually(lambda: informer.get(name) is not None)
        assert informer.get(name)["metadata"]["uid"] == created["metadata"]["uid"]
        assert {o["metadata"]["name"] for o in informer.by_index("byDriver", DRIVER)} == {
            name, existing["metadata"]["name"]}

        two_devices = {"spec": {"devices": [{"name": "a"}, {"name": "b"}]}}
        updated = await kube.patch(RESOURCE_SLICES, name, two_devices)
        rv = updated["metadata"]["resourceVersion"]
        await eventually(lambda: informer.get(name)["metadata"]["resourceVersion"] == rv)
        assert [d["name"] for d in informer.get(name)["spec"]["devices"]] == ["a", "b"]

        await kube.delete(RESOURCE_SLICES, name)
        await eventually(lambda: informer.get(name) is None)
        assert [o["metadata"]["name"] for o in informer.by_index("byDriver", DRIVER)] == [
            existing["metadata"]["name"]]
        assert [e for e in observed.events if e[1] == name] == [("add", name), ("update", name),
                                                                 ("delete", name)]
        assert observed.problems == []
        assert informer.resource_version is not None
    finally:
        await informer.stop()


async def test_a_handler_that_raises_is_logged_and_the_informer_goes_on(
    kube: KubeClient, run_label: str, cleanup_slices: None
) -> None:
    informer = Informer(kube, RESOURCE_SLICES, label_selector=f"draflow.dev/test-run={run_label}")

    def fails_on_bad(event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if (new or old or {})["metadata"]["name"].startswith("bad-"):
            raise RuntimeError("handler bug")

    observed = Observed()
    informer.add_handler(fails_on_bad)
    informer.add_handler(observed)  # later handlers still see the event the first one failed on
    await informer.start()
    try:
        async with asyncio.timeout(30):
            await informer.wait_synced()
        bad, good = f"bad-{run_label}", f"good-{run_label}"
        await kube.create(RESOURCE_SLICES, resource_slice(bad, run_label))
        await kube.create(RESOURCE_SLICES, resource_slice(good, run_label))
        await eventually(lambda: good in observed.state, what="the event after the failing one")
        assert [e for e in observed.events if e[1] in (bad, good)] == [("add", bad), ("add", good)]
        assert informer.list_count == 1  # no relist, no re-watch: the failure stayed in the handler
    finally:
        await informer.stop()


@pytest.fixture(scope="module")
async def etcd_watch_env(testenv: Any) -> AsyncIterator[tuple[Any, KubeClient]]:
    """An environment whose watches are served from etcd, so compaction gives a real 410 at once.

    The session environment is used when it already runs without the watch cache; otherwise a private
    one is started for this module (the watch cache keeps recent events in memory and would replay them).
    """
    if not testenv.watch_cache:
        yield testenv, await KubeClient.from_kubeconfig(str(testenv.kubeconfig))
        return
    async with Environment(watch_cache=False, apiserver_args=testenv.apiserver_args) as env:
        client = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        try:
            yield env, client
        finally:
            await client.close()


async def test_informer_converges_exactly_after_its_watch_expires(
    etcd_watch_env: tuple[Any, KubeClient], run_label: str
) -> None:
    env, kube = etcd_watch_env
    names = [f"c{i}-{run_label}" for i in range(6)]
    for name in names:
        await kube.create(RESOURCE_SLICES, resource_slice(name, run_label))
    informer = Informer(kube, RESOURCE_SLICES, label_selector=f"draflow.dev/test-run={run_label}")
    observed = Observed()
    informer.add_handler(observed)
    await informer.start()
    async with asyncio.timeout(30):
        await informer.wait_synced()
    await eventually(lambda: observed.versions() == informer_versions(informer))
    assert set(observed.state) == set(names)
    lists_before = informer.list_count
    stale = informer.resource_version
    assert stale is not None

    # The watch is down while the world changes: deletes, updates, creates, and a delete + re-create.
    await informer.stop()
    await kube.delete(RESOURCE_SLICES, names[0])
    await kube.delete(RESOURCE_SLICES, names[1])
    await kube.patch(RESOURCE_SLICES, names[2], {"metadata": {"annotations": {"changed": "1"}}})
    await kube.patch(RESOURCE_SLICES, names[3], {"spec": {"devices": [{"name": "x"}, {"name": "y"}]}})
    await kube.delete(RESOURCE_SLICES, names[4])
    await kube.create(RESOURCE_SLICES, resource_slice(names[4], run_label, devices=3))
    for i in range(6, 9):
        await kube.create(RESOURCE_SLICES, resource_slice(f"c{i}-{run_label}", run_label))

    # Compaction makes the informer's last resourceVersion a real 410 (too old resource version);
    # resuming from it must lead to a relist whose diff repairs the cache.
    await env.compact_etcd()
    with pytest.raises(Gone):
        async for _ in kube.watch(RESOURCE_SLICES, resource_version=stale, timeout_seconds=5):
            pass
    await informer.start()
    try:
        truth = await api_versions(kube, run_label)
        await eventually(lambda: informer.list_count > lists_before and observed.versions() == truth)
        assert observed.problems == []
        assert informer_versions(informer) == truth
        assert set(truth) == {*names[2:], *(f"c{i}-{run_label}" for i in range(6, 9))}
        adds = [key for event, key in observed.events if event == "add"]
        assert len(adds) == len(set(adds)), "no object is announced as added twice"

        # The informer keeps watching after the relist.
        late = f"late-{run_label}"
        await kube.create(RESOURCE_SLICES, resource_slice(late, run_label))
        truth = await api_versions(kube, run_label)
        await eventually(lambda: observed.versions() == truth)
        assert observed.problems == []
    finally:
        await informer.stop()
        await kube.delete_collection(RESOURCE_SLICES, label_selector=f"draflow.dev/test-run={run_label}")


def informer_versions(informer: Informer) -> dict[str, str]:
    return {key_of(o): o["metadata"]["resourceVersion"] for o in informer.list()}
