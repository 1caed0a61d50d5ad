"""A service that starts while the API server does not answer serves /healthz at once (liveness: alive,
so no restart loop during an API server outage) and not /readyz.

The start-up asks the API server which optional APIs it serves (``draflow_runtime.served``) and retries
until it answers; that wait must not hold /healthz back."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from draflow_testenv.servers import free_port
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


async def status(url: str) -> int:
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session, \
                session.get(url) as resp:
            return resp.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


def silent_kubeconfig(real: Path, out: Path) -> Path:
    """``real`` pointed at a port nothing listens on: connection refused, as while kube-apiserver restarts."""
    config = yaml.safe_load(real.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    out.write_text(yaml.safe_dump(config))
    return out


@pytest.mark.parametrize("service", ["claim-controller", "structured-allocator"])
async def test_healthz_is_served_while_the_api_server_does_not_answer(
    testenv: Any, tmp_path: Path, service: str
) -> None:
    kubeconfig = silent_kubeconfig(Path(testenv.kubeconfig), tmp_path / "kubeconfig")
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / service), "--kubeconfig", str(kubeconfig),
        "--http-port", str(port), "--http-host", "127.0.0.1", "--nats-url", "",
        env={**os.environ, "OTEL_SDK_DISABLED": "true"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"

        async def alive() -> bool:
            assert proc.returncode is None, f"{service} exited with {proc.returncode}"
            return await status(base + "/healthz") == 200
        await eventually(alive, 60, f"{service} /healthz while the API server does not answer")
        assert await status(base + "/readyz") != 200, "not ready without the API server"
    finally:
        proc.terminate()
        _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
