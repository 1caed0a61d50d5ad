"""The publisher's labels on its slices are anyone's to edit. In single-node mode its slice informer
selects ``draflow.dev/publisher-node=<node>``: a ``kubectl label`` that changes or removes that label (or
``app.kubernetes.io/managed-by``) takes the slice out of the publisher's view. The pool must still be
published: before, every sync tried to create the slice again under its own name, got AlreadyExists and
retried forever — the pool's inventory was never updated again."""

from __future__ import annotations

from typing import Any

import pytest

from draflow_runtime.kube import RESOURCE_SLICES
from draflow_testenv.wait import eventually

from .conftest import Harness, settled

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("labels", [
    {"draflow.dev/publisher-node": "someone-else"},  # removing it hides the slice the same way
    {"app.kubernetes.io/managed-by": None},
], ids=["node-changed", "managed-by-removed"])
async def test_a_slice_whose_labels_a_user_changed_is_still_the_pools(
    harness: Harness, labels: dict[str, Any],
) -> None:
    h = harness
    await h.start_driver()
    pub = await h.start_publisher()

    async def devices(n: int) -> list[dict[str, Any]] | None:
        slices = await h.slices()
        return slices if len(slices) == 1 and len(slices[0]["spec"].get("devices") or ()) == n else None

    (published,) = await eventually(lambda: devices(8), timeout=30, what="8 devices published")
    await eventually(lambda: settled(pub), timeout=30)
    want = dict(published["metadata"]["labels"])
    name = published["metadata"]["name"]
    await h.kube.patch(RESOURCE_SLICES, name, {"metadata": {"labels": labels}})

    h.dirs.set_gpus(4)  # the inventory changes after the edit
    (now,) = await eventually(lambda: devices(4), timeout=30, what="the pool's new inventory published")
    assert now["metadata"]["name"] == name
    assert now["metadata"]["labels"] == want  # put back
