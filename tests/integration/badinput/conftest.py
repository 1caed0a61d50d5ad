"""The bad-input corpus: one running stack (the five services, two simulated nodes, one namespace) for
the whole package; each case gets it with /healthz watched and its logs marked (``badinput_kit``)."""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))

from badinput_kit import Stack, start_stack

from draflow_runtime.kube import KubeClient


@pytest_asyncio.fixture(scope="package", loop_scope="session")
async def running_stack(testenv: Any, kube: KubeClient) -> AsyncIterator[Stack]:
    ns = f"badinput-{uuid.uuid4().hex[:8]}"
    await testenv.admin.ensure_namespace(ns)
    await testenv.admin.ensure_service_account(ns, "default")
    fleet = Path(tempfile.mkdtemp(prefix="dbi-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    stack: Stack | None = None
    try:
        stack = await start_stack(testenv, kube, ns, fleet, testenv.run_service)
        yield stack
    finally:
        if stack is not None:
            await stack.end()
            await stack.flow.stop()
            await stack.flow.clean_up()
        shutil.rmtree(fleet, ignore_errors=True)
        await testenv.admin.purge_namespace(ns)


@pytest_asyncio.fixture(loop_scope="session")
async def stack(running_stack: Stack) -> AsyncIterator[Stack]:
    """The package's stack, checked alive, with /healthz watched from here to the end of the case."""
    running_stack.alive()
    running_stack.begin()
    try:
        yield running_stack
    finally:
        await running_stack.end()
