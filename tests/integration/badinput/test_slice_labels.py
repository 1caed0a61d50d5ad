"""The labels slice-publisher puts on its ResourceSlices are user-writable: a ``kubectl label`` that
removes ``draflow.dev/pool-hash`` from a published slice, or sets it to a wrong value, must not cut the
pool off from its publisher (before: the slice was no longer found as the pool's, every sync tried to
create it again under the same name, AlreadyExists, retried forever: the pool never changed again, a
device's taint or removal would never be published). The label is put back and the pool stays one
pool."""

from __future__ import annotations

from typing import Any

import pytest
from badinput_kit import DRIVER, Stack

from draflow_runtime.kube import RESOURCE_SLICES

pytestmark = pytest.mark.integration

POOL_HASH = "draflow.dev/pool-hash"


async def _slices_of(stack: Stack, node: str) -> list[dict[str, Any]]:
    items = (await stack.kube.list(RESOURCE_SLICES)).get("items") or []
    return [s for s in items if s["spec"].get("nodeName") == node and s["spec"]["driver"] == DRIVER]


@pytest.mark.parametrize("value", [None, "0000000000"], ids=["removed", "wrong"])
async def test_a_pool_hash_label_changed_by_a_user_is_put_back(stack: Stack, value: str | None) -> None:
    node = stack.flow.nodes[0]
    (published,) = await _slices_of(stack, node)
    name, want = published["metadata"]["name"], published["metadata"]["labels"][POOL_HASH]
    await stack.kube.patch(RESOURCE_SLICES, name, {"metadata": {"labels": {POOL_HASH: value}}})

    async def restored() -> dict[str, Any] | None:
        slices = await _slices_of(stack, node)
        ok = [s for s in slices if s["metadata"]["name"] == name
              and (s["metadata"].get("labels") or {}).get(POOL_HASH) == want]
        return ok[0] if len(slices) == 1 and ok else None

    now = await stack.until(restored, f"label {POOL_HASH} of ResourceSlice {name} put back")
    assert now["spec"]["pool"]["resourceSliceCount"] == 1
    failed = [r for r in stack.log_since("slice-publisher") if r.get("event") == "stale cache, will retry"]
    assert len(failed) <= 1, failed[:3]
    await stack.still_serving()
