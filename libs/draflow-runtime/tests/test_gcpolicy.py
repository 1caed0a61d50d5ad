"""The garbage-collector policy: fewer young collections; what exists once the caches synced is frozen,
not before."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from draflow_runtime import gcpolicy


@pytest.fixture
def gc_state() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


def test_tune_raises_only_the_young_threshold(gc_state: None) -> None:
    gc.set_threshold(700, 10, 10)
    gcpolicy.tune()
    assert gc.get_threshold() == (gcpolicy.YOUNG_THRESHOLD, 10, 10)


async def test_objects_are_frozen_only_once_the_caches_synced(gc_state: None) -> None:
    synced = asyncio.Event()
    freezing = asyncio.create_task(gcpolicy.freeze_when_synced(synced.wait))
    await asyncio.sleep(0)
    assert gc.get_freeze_count() == 0 and not freezing.done()
    synced.set()
    await freezing
    assert gc.get_freeze_count() > 0
