"""Generated hostile input (:mod:`hostile`) against the running stack, checked by :mod:`hostile_run`:
a fixed set of seeds here; more by hand with ``DRAFLOW_FUZZ_SEEDS`` (``hack/badinput-fuzz.sh``, see the
README of this directory). A failure prints the seed: ``DRAFLOW_FUZZ_SEEDS=<seed>`` replays it."""

from __future__ import annotations

import os

import hostile
import hostile_run
import pytest
from badinput_kit import DRIVER, Stack

pytestmark = pytest.mark.integration

FIXED = [1, 2, 3]


def _seeds() -> list[int]:
    """``DRAFLOW_FUZZ_SEEDS``: ``7``, ``1,5,9`` or ``100-199`` (inclusive); else :data:`FIXED`."""
    text = os.environ.get("DRAFLOW_FUZZ_SEEDS", "").strip()
    if not text:
        return FIXED
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += range(int(low), int(high or low) + 1)
    return seeds


def test_the_generator_is_deterministic_and_near_the_limits() -> None:
    args = {"real_driver": DRIVER, "real_class": "c", "nodes": ["n0", "n1"]}
    assert hostile.batch(5, "t", **args) == hostile.batch(5, "t", **args)
    batches = [hostile.batch(s, "t", **args) for s in range(20)]
    devices = [len(s["spec"].get("devices") or ()) for b in batches for s in b.slices]
    assert max(devices) == 128
    requests = [len(t["spec"]["spec"]["devices"]["requests"]) for b in batches for t in b.templates]
    assert max(requests) == 32


@pytest.mark.parametrize("seed", _seeds())
async def test_hostile_batch_is_refused_or_served_and_named(stack: Stack, seed: int) -> None:
    batch = hostile.batch(seed, stack.name(f"fz{seed}"), real_driver=DRIVER,
                          real_class=stack.flow.device_class, nodes=stack.flow.nodes)
    outcome = await hostile_run.run(stack, batch)
    print(f"seed {seed}: {batch.count()} objects, {outcome.admitted} admitted, "
          f"{len(outcome.refused)} refused, {outcome.running} pods Running")
    for pod, how in outcome.named.items():
        print(f"  {pod}: {how}")
    for line in outcome.refused:
        print("  refused", line)
    assert outcome.admitted, outcome.refused  # the generator must get past the API server
    assert not outcome.violations, f"seed {seed}:\n" + "\n".join(outcome.violations)
