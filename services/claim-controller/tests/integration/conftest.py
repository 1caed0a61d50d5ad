"""Fixtures of the claim-controller integration tests; makes ``cc_kit`` importable."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))

from cc_kit import DEVICE_CLASS, Kit

from draflow_runtime.errors import AlreadyExists
from draflow_runtime.kube import DEVICE_CLASSES, KubeClient


@pytest_asyncio.fixture(loop_scope="session")
async def kit(kube: KubeClient, make_namespace: Callable[..., Any],
              service_identity: Callable[..., Any]) -> AsyncIterator[Kit]:
    """A fresh namespace, the test DeviceClass, and in-process controllers stopped after the test; the
    controllers run as the admin and (a second run of each test) with only claim-controller's RBAC."""
    with contextlib.suppress(AlreadyExists):
        await kube.create(DEVICE_CLASSES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": DEVICE_CLASS}, "spec": {},
        })
    namespace = await make_namespace("cc")
    kit = Kit(kube, namespace, await service_identity("claim-controller", namespace))
    try:
        yield kit
    finally:
        await kit.stop_all()
