"""A claim-controller replica is SIGKILLed: the survivor takes its shards and serves the pod created
during the outage. The takeover time is measured and printed (``-s``), never asserted: every replica reads
every shard's Lease each retry period, so the takeover comes about one lease duration (4 s here) after the
dead replica's last renewal, not two (first its member slot, then the shard's Lease).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from cc_kit import Kit, eventually, http_get, pod, template
from test_shards_integration import (
    POD_CLAIMS,
    SHARDS,
    argv,
    check_exactly_the_claims,
    shard_holders,
    unrecorded,
)

from claim_controller.sharding import pod_shard_key
from draflow_runtime.kube import LEASES, PODS, RESOURCE_CLAIM_TEMPLATES
from draflow_runtime.shards import shard_of
from draflow_testenv.environment import Environment
from draflow_testenv.servers import free_port

pytestmark = pytest.mark.integration


def _micro_time(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


async def test_the_survivor_takes_a_killed_replicas_shards_and_serves_the_pod_created_meanwhile(
    kit: Kit, testenv: Environment, run_service: Any,
) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    ports = {"a": free_port(), "b": free_port()}
    replicas = {name: await run_service(argv(kit, testenv, port, f"replica-{name}"),
                                        kubeconfig=kit.identity.kubeconfig, name=f"cc-takeover-{name}")
                for name, port in ports.items()}

    async def split() -> dict[int, str] | None:
        holders = await shard_holders(kit)
        return holders if set(holders.values()) == {"replica-a", "replica-b"} else None
    holders = await eventually(split, timeout=60, what="both replicas hold shards")
    of_a = {shard for shard, holder in holders.items() if holder == "replica-a"}
    name = next(n for n in (f"outage-{i}" for i in range(1000))
                if shard_of(pod_shard_key(kit.namespace, n), SHARDS) in of_a)

    await replicas["a"].kill()  # SIGKILL: nothing released, its Leases must expire
    killed = time.monotonic()
    renewals = [(await kit.get(LEASES, f"claim-controller-shard-{s}") or {})["spec"]["renewTime"]
                for s in sorted(of_a)]
    await kit.create(PODS, pod(name, {c: {"resourceClaimTemplateName": "t"} for c in POD_CLAIMS}))

    async def b_holds_all() -> bool:
        return set((await shard_holders(kit)).values()) == {"replica-b"}
    await eventually(b_holds_all, timeout=60, interval=0.05, what="replica-b takes over every shard")
    after_kill = time.monotonic() - killed
    # one machine, one clock: the dead replica's last renewTime can be compared with now here
    after_renewal = (datetime.now(UTC) - max(_micro_time(r) for r in renewals)).total_seconds()
    print(f"\nshard takeover: {after_kill:.1f}s after SIGKILL, {after_renewal:.1f}s after replica-a's last "
          f"renewal (shards {sorted(of_a)}; --lease-duration 4 --retry-period 0.5)", flush=True)

    async def recorded() -> bool:
        return not await unrecorded(kit, [name])
    await eventually(recorded, timeout=60, what="the pod created during the outage got its claims")
    pods = (await kit.kube.list(PODS, kit.namespace))["items"]
    check_exactly_the_claims(pods, await kit.claims())
    assert (await http_get(f"http://127.0.0.1:{ports['b']}/readyz"))[0] == 200
