"""Shared fixtures of the shim tests: short socket directories and the identities the shim and the driver
run under (every integration test runs once as the admin and once under the repository's RBAC)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from draflow_testenv.identity import ServiceIdentity

sys.path.insert(0, str(Path(__file__).parent))  # fakedriver, helpers, shimenv
from shimenv import env  # noqa: F401  (fixture: one simulated node, a test driver, its shims)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="shim-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest_asyncio.fixture(loop_scope="session")
async def shim_identity(
    make_namespace: Callable[..., Awaitable[str]],
    service_identity: Callable[..., Awaitable[ServiceIdentity]],
) -> ServiceIdentity:
    """Who the shim under test is: the admin, and (a second run of the test, fixture ``service_identity``)
    only the shim's deploy/kustomize RBAC plus the simulated kubelet's, as the sim overlay grants them."""
    return await service_identity("kubelet-dra-shim+simulated-kubelet", await make_namespace("shim-id"))


@pytest_asyncio.fixture(loop_scope="session")
async def driver_identity(
    shim_identity: ServiceIdentity, service_identity: Callable[..., Awaitable[ServiceIdentity]],
) -> ServiceIdentity:
    """The reference-driver processes' identity, in the same run (admin or RBAC) as ``shim_identity``."""
    return await service_identity("reference-driver", shim_identity.namespace)
