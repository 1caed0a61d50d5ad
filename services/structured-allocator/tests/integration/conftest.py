"""Fixtures of the structured-allocator integration tests; makes ``sa_kit`` importable."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))

from sa_kit import Kit

from draflow_runtime.kube import KubeClient


@pytest_asyncio.fixture(loop_scope="session")
async def kit(kube: KubeClient, make_namespace: Callable[..., Any],
              service_identity: Callable[..., Any]) -> AsyncIterator[Kit]:
    """A fresh namespace, unique scheduler/driver/class names, cleanup of cluster-scoped objects; the
    allocator runs as the admin and (a second run of each test) with only its own RBAC."""
    namespace = await make_namespace("sa")
    kit = Kit(kube, namespace, await service_identity("structured-allocator", namespace))
    try:
        yield kit
    finally:
        await kit.close()
