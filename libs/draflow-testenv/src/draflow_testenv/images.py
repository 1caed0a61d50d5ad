"""Container images built on this machine (no Docker engine, no image registry) and imported into containerd.

An image is a root filesystem directory turned into a one-layer OCI image archive (``oci-layout``,
``index.json``, ``blobs/sha256/...``; the layer an uncompressed tar with every entry owned by root), which
``ctr images import`` loads. The images:

- ``PAUSE_IMAGE``: the pod sandbox, holding only ``/pause`` (hack/pause, draflow's own).
- ``WORKLOAD_IMAGE``: a small workload image, Debian's ``busybox-static`` with its applets linked in ``/bin``.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from draflow_testenv.binaries import cache_dir

REGISTRY = "draflow.local"  # an image name prefix only: images here are never pulled
PAUSE_IMAGE = f"{REGISTRY}/pause:1"
WORKLOAD_IMAGE = f"{REGISTRY}/workload:1"
FORMAT = 2  # part of every cached archive's name: raise it when the way images are built changes


class ImageBuildError(RuntimeError):
    """A step of an image build failed; the message quotes its output."""


async def run(
    argv: Sequence[str | Path], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
) -> str:
    proc = await asyncio.create_subprocess_exec(
        *[str(a) for a in argv], cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        raise ImageBuildError(f"{' '.join(str(a) for a in argv)} exited {proc.returncode}:\n{text[-4000:]}")
    return text


def _write_layer(rootfs: Path, out: Path, owners: Mapping[str, int]) -> None:
    """A deterministic tar of ``rootfs`` (sorted, mtime 0), owned by root except the paths under an
    ``owners`` prefix (relative path -> uid = gid)."""
    def owner(rel: str) -> int:
        for prefix, uid in owners.items():
            if rel == prefix or rel.startswith(prefix + "/"):
                return uid
        return 0

    with tarfile.open(out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                path = Path(dirpath) / name
                rel = str(path.relative_to(rootfs))
                info = tar.gettarinfo(str(path), arcname=rel)
                info.uid = info.gid = owner(rel)
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isfile():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def oci_archive(rootfs: Path, image: str, out: Path, *, config: Mapping[str, object],
                owners: Mapping[str, int] | None = None) -> Path:
    """Write ``rootfs`` as the one-layer OCI image ``image`` to the archive ``out``.

    ``config`` is the image's runtime config (``Entrypoint``, ``Cmd``, ``Env``, ``User``, ``WorkingDir``).
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    layer_path = out.with_name(out.name + ".layer")
    _write_layer(rootfs, layer_path, owners or {})
    layer_digest, layer_size = _sha256_file(layer_path), layer_path.stat().st_size
    cfg = json.dumps({
        "architecture": "amd64", "os": "linux", "config": dict(config),
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }, sort_keys=True).encode()
    cfg_digest = "sha256:" + hashlib.sha256(cfg).hexdigest()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg_digest,
                   "size": len(cfg)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest,
                    "size": layer_size}],
    }, sort_keys=True).encode()
    man_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": man_digest,
                       "size": len(manifest), "platform": {"architecture": "amd64", "os": "linux"},
                       "annotations": {"io.containerd.image.name": image,
                                       "org.opencontainers.image.ref.name": image.rsplit(":", 1)[1]}}],
    }).encode()
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w") as tar:
        for name, data in [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", index),
                           (f"blobs/sha256/{cfg_digest[7:]}", cfg),
                           (f"blobs/sha256/{man_digest[7:]}", manifest)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        tar.add(layer_path, arcname=f"blobs/sha256/{layer_digest[7:]}")
    layer_path.unlink()
    tmp.replace(out)
    return out


def images_dir() -> Path:
    return cache_dir() / "images"


async def pause_archive(pause_binary: Path) -> Path:
    """The sandbox image's archive (cached by the binary's own cache path, which names its version)."""
    out = images_dir() / f"{pause_binary.parent.name}-f{FORMAT}.tar"
    if out.is_file():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copy2(pause_binary, root / "pause")
        return oci_archive(root, PAUSE_IMAGE, out, config={"Entrypoint": ["/pause"], "User": "65535:65535"})


async def debian_package(name: str) -> Path:
    """The ``.deb`` of a Debian package of this machine's suite, downloaded once with ``apt-get download``."""
    d = cache_dir() / "debs"
    d.mkdir(parents=True, exist_ok=True)
    found = sorted(d.glob(f"{name}_*.deb"))
    if found:
        return found[-1]
    try:
        await run(["apt-get", "download", name], cwd=d)
    except ImageBuildError:  # no or stale package lists on this machine: refresh them once
        await run(["apt-get", "update", "-qq"])
        await run(["apt-get", "download", name], cwd=d)
    found = sorted(d.glob(f"{name}_*.deb"))
    if not found:
        raise ImageBuildError(f"apt-get download {name} left no .deb in {d}")
    return found[-1]


async def workload_archive() -> Path:
    """A small workload image: Debian's ``busybox-static`` (sh, env, cat, sleep, ... in ``/bin``)."""
    deb = await debian_package("busybox-static")
    out = images_dir() / f"workload-{deb.stem.replace('%3a', '_')}-f{FORMAT}.tar"
    if out.is_file():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        extracted, root = Path(tmp) / "deb", Path(tmp) / "root"
        await run(["dpkg-deb", "-x", deb, extracted])
        (root / "bin").mkdir(parents=True)
        (root / "tmp").mkdir(mode=0o1777)
        shutil.copy2(extracted / "bin" / "busybox", root / "bin" / "busybox")
        applets = (await run([root / "bin" / "busybox", "--list"])).split()
        for applet in applets:
            if applet != "busybox":
                (root / "bin" / applet).symlink_to("busybox")
        return oci_archive(root, WORKLOAD_IMAGE, out, config={
            "Cmd": ["/bin/sh"], "Env": ["PATH=/bin"], "WorkingDir": "/"})


async def import_archive(ctr: Path, containerd_socket: Path, archive: Path) -> None:
    """Load an image archive into containerd's ``k8s.io`` namespace (the one the CRI plugin serves)."""
    await run([ctr, "--address", containerd_socket, "--namespace", "k8s.io", "images", "import",
               "--platform", "linux/amd64", archive])
