"""Fixtures of the CLI tests; ``cli_fixtures`` (objects the integration tests create) importable."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from draflow_runtime.kube import RESOURCE_SLICES, KubeClient

sys.path.insert(0, str(Path(__file__).parent))  # cli_fixtures


@pytest.fixture
async def driver(kube: KubeClient) -> AsyncIterator[str]:
    """A driver name no other test publishes for; its slices are removed afterwards."""
    name = f"cli-{uuid.uuid4().hex[:6]}.draflow.example"
    yield name
    slices = (await kube.list(RESOURCE_SLICES)).get("items") or []
    for s in slices:
        if s["spec"]["driver"] == name:
            await kube.delete(RESOURCE_SLICES, s["metadata"]["name"])
