"""The kube-apiserver feature gates draflow wants, filtered to what the pinned binary accepts.

A gate that was removed upstream makes kube-apiserver refuse to start ("unrecognized feature gate: X"), while
a GA gate locked to true still accepts ``X=true``. ``accepted_gates`` asks the binary itself: it runs it with
the wanted set, drops each gate it rejects and tries again (flag parsing fails within a second, long before
any etcd connection), then caches the answer next to the binary.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from pathlib import Path

WANTED_GATES = (
    "DRAPartitionableDevices",
    "DRAConsumableCapacity",
    "DRADeviceTaints",
    "DRADeviceTaintRules",
    "DRADeviceBindingConditions",
    "DRAResourceClaimDeviceStatus",
    "DRAExtendedResource",
    "DRAAdminAccess",
    "DRAPrioritizedList",
    "DRAFractionalCapacityRange",
    "DRASchedulerFilterTimeout",
    "DRAResourceClaimGranularStatusAuthorization",
    "DRAListTypeAttributes",
    "DRADeviceCompatibilityGroups",
    "DRADerivedAttributes",
    "DRAResourcePoolStatus",
    "DRAPartitionableDevicesType",
    "DRAOptionalNodeOperations",
    "DRANodeAllocatableResources",
    "DRAWorkloadResourceClaims",
    # Not a DRA gate: PodGroups (scheduling.k8s.io/v1beta1, servers.RUNTIME_CONFIG) and a pod's
    # spec.schedulingGroup; DRAWorkloadResourceClaims depends on it (kube_features.go).
    "GenericWorkload",
)

# DRA gates the pinned kube-apiserver accepts that draflow does not switch on yet, with the reason
# (issue 13). A DRA gate the binary lists that is in neither tuple fails test_featuregates.
NOT_WANTED_GATES: dict[str, str] = {}

_HELP_GATE = re.compile(r"\b(DRA[A-Za-z0-9]+)=true\|false\b")


def gates_flag(accepted: list[str], rejected: list[str]) -> str:
    """``--feature-gates`` for a draflow service: what the kube-apiserver accepted on, the rest off."""
    return ",".join([*(f"{g}=true" for g in accepted), *(f"{g}=false" for g in rejected)])


async def binary_dra_gates(binary: Path) -> set[str]:
    """The DRA feature gates ``binary --help`` lists (the binary hides GA gates locked to true)."""
    proc = await asyncio.create_subprocess_exec(
        str(binary), "--help", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return set(_HELP_GATE.findall(out.decode(errors="replace")))


_UNRECOGNIZED = re.compile(r"unrecognized feature gate: ([A-Za-z0-9]+)")


async def _run(binary: Path, gates: list[str]) -> str:
    arg = ",".join(f"{g}=true" for g in gates)
    proc = await asyncio.create_subprocess_exec(
        str(binary), f"--feature-gates={arg}", "--etcd-servers=http://127.0.0.1:1", "--secure-port=0",
        "--bind-address=127.0.0.1", "--cert-dir=/nonexistent/draflow-probe",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 20)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return ""
    return out.decode(errors="replace")


async def accepted_gates(binary: Path, wanted: tuple[str, ...] = WANTED_GATES) -> tuple[list[str], list[str]]:
    """(accepted, rejected) gates for ``binary``; the result is cached in ``<binary>.featuregates.json``."""
    cache = binary.with_name(binary.name + ".featuregates.json")
    mtime = os.stat(binary).st_mtime
    cached = _read_cache(cache, list(wanted), mtime)
    if cached is not None:
        return cached
    accepted, rejected = list(wanted), []
    while accepted:
        match = _UNRECOGNIZED.search(await _run(binary, accepted))
        if not match or match.group(1) not in accepted:
            break
        accepted.remove(match.group(1))
        rejected.append(match.group(1))
    payload = {"wanted": list(wanted), "mtime": mtime, "accepted": accepted, "rejected": rejected}
    with contextlib.suppress(OSError):
        _write(cache, json.dumps(payload))
    return accepted, rejected


def _read_cache(cache: Path, wanted: list[str], mtime: float) -> tuple[list[str], list[str]] | None:
    try:
        data = json.loads(cache.read_text())
        if data["wanted"] == wanted and data["mtime"] == mtime:
            return data["accepted"], data["rejected"]
    except (OSError, ValueError, KeyError):
        pass
    return None


def _write(path: Path, text: str) -> None:
    path.write_text(text)
