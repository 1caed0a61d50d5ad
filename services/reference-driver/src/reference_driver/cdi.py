"""CDI (Container Device Interface) spec files, one per prepared claim.

Rendering is pure (:func:`render_claim_spec`); :func:`write_spec` and :func:`remove_spec` do the I/O.
A claim's spec file is ``<cdi root>/<vendor>-<class>_<claim uid>.json`` (CDI's transient spec name),
written atomically (temp file in the same directory, fsync, rename), so a container runtime never reads
half a spec. Its devices are named ``<claim uid>-<device>`` (``-<share id>`` appended for a shared
device), and the fully qualified ID the kubelet gets is ``<vendor>/<class>=<that name>``, e.g.
``gpu.draflow.example/gpu=6a1f...-gpu-3``.

Each device's containerEdits set environment variables whose prefix is the device name in upper case
(``gpu-3`` -> ``DRAFLOW_GPU_3``): ``DRAFLOW_GPU_3=<uuid>``, ``..._CLAIM=<namespace>/<name>``,
``..._SHARING_STRATEGY`` and ``..._TIMESLICE_INTERVAL`` / ``..._PARTITION_COUNT`` from the opaque
config, ``..._SHARE_ID`` and ``..._MEMORY`` / ``..._COMPUTE`` (consumed capacity) for shared devices.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draflow_runtime.files import atomic_write

CDI_VERSION = "0.6.0"
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")


@dataclass(frozen=True)
class CdiDevice:
    """One allocated device as CDI sees it."""

    device: str
    uuid: str
    share_id: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # suffix -> value, e.g. SHARING_STRATEGY


def cdi_kind(vendor: str, cdi_class: str) -> str:
    return f"{vendor}/{cdi_class}"


def device_name(claim_uid: str, device: str, share_id: str | None = None) -> str:
    """The CDI device name of an allocated device within its claim's spec."""
    name = f"{claim_uid}-{device}"
    return f"{name}-{share_id}" if share_id else name


def qualified_device_id(vendor: str, cdi_class: str, name: str) -> str:
    """``vendor/class=name``, the form NodePrepareResources returns."""
    return f"{cdi_kind(vendor, cdi_class)}={name}"


def spec_file_name(vendor: str, cdi_class: str, claim_uid: str) -> str:
    return f"{vendor}-{cdi_class}_{claim_uid}.json"


def env_key(text: str) -> str:
    """``gpu-3-part-1`` -> ``GPU_3_PART_1``: upper case, runs of other characters become ``_``."""
    return _NON_WORD.sub("_", text).strip("_").upper()


def env_prefix(device: str) -> str:
    """``gpu-3-part-1`` -> ``DRAFLOW_GPU_3_PART_1``."""
    return "DRAFLOW_" + env_key(device)


def render_claim_spec(
    vendor: str, cdi_class: str, claim_uid: str, claim_ref: str, devices: Sequence[CdiDevice]
) -> dict[str, Any]:
    """The CDI spec (as a JSON-ready dict) of one claim's devices. Pure."""
    rendered = []
    for dev in devices:
        prefix = env_prefix(dev.device)
        env = [f"{prefix}={dev.uuid}", f"{prefix}_CLAIM={claim_ref}"]
        if dev.share_id:
            env.append(f"{prefix}_SHARE_ID={dev.share_id}")
        env.extend(f"{prefix}_{suffix}={value}" for suffix, value in dev.env.items())
        rendered.append({
            "name": device_name(claim_uid, dev.device, dev.share_id),
            "containerEdits": {"env": env},
        })
    return {"cdiVersion": CDI_VERSION, "kind": cdi_kind(vendor, cdi_class), "devices": rendered}


def write_spec(root: Path, vendor: str, cdi_class: str, claim_uid: str, spec: Mapping[str, Any]) -> Path:
    """Write a claim's spec atomically (temp file + rename, no fsync: as the CDI library writes specs;
    :func:`spec_intact` tells an empty file left by a power loss); returns its path. Idempotent."""
    path = root / spec_file_name(vendor, cdi_class, claim_uid)
    atomic_write(path, json.dumps(spec, indent=2, sort_keys=True).encode() + b"\n", durability="none")
    return path


def spec_intact(root: Path, vendor: str, cdi_class: str, claim_uid: str) -> bool:
    """Whether the claim's spec file exists and is a CDI spec of this vendor and class (not an empty or
    torn file a power loss left behind, since :func:`write_spec` does not fsync)."""
    try:
        spec = json.loads((root / spec_file_name(vendor, cdi_class, claim_uid)).read_bytes())
    except (OSError, ValueError):
        return False
    if not isinstance(spec, dict):
        return False
    return spec.get("kind") == cdi_kind(vendor, cdi_class) and bool(spec.get("devices"))


def remove_spec(root: Path, vendor: str, cdi_class: str, claim_uid: str) -> bool:
    """Remove a claim's spec file; True if there was one. Idempotent."""
    path = root / spec_file_name(vendor, cdi_class, claim_uid)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
