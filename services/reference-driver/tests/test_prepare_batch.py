"""A NodePrepareResources batch of thousands of claims (anyone who can reach the socket can send one, 20,000
fit in the 4 MiB message limit) is worked through a few claims at a time: before, every claim's API read
started at once, and the driver's event loop (its /healthz too) froze for seconds at a time.

The API server is replaced by a counting stand-in at the client seam (the claims do not exist)."""

from __future__ import annotations

import asyncio
from typing import Any

from draflow_runtime.errors import NotFound
from reference_driver.fleet import Fleet
from reference_driver.node import PREPARE_CONCURRENCY
from reference_driver.settings import DriverSettings


class CountingKube:
    """``get`` answers 404 after a moment and records how many reads were in flight at most."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.reads = 0

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.in_flight += 1
        self.reads += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.001)
        finally:
            self.in_flight -= 1
        raise NotFound(404, "NotFound", f"{name} not found")


async def test_a_batch_of_thousands_of_claims_is_read_a_few_at_a_time(short_tmp):
    kube = CountingKube()
    settings = DriverSettings(node_name="n1", registry_dir=str(short_tmp / "reg"),
                              plugins_dir=str(short_tmp / "pl"), cdi_root=str(short_tmp / "cdi"),
                              state_dir=str(short_tmp / "st"), http_port=0)
    node = Fleet(settings, kube).nodes["n1"]  # type: ignore[arg-type]
    claims = [("ns", f"c{i}", f"uid-{i}") for i in range(3000)]

    outcomes = await node.prepare(claims)

    assert kube.reads == 3000
    assert 1 < kube.most <= PREPARE_CONCURRENCY, kube.most  # concurrent, and bounded (was 3000)
    assert sorted(outcomes) == sorted(uid for _, _, uid in claims)
    assert all(o.error == f"claim ns/c{uid[4:]} not found" and not o.devices for uid, o in outcomes.items())
