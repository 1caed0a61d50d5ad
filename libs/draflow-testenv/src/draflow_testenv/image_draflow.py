"""The ``draflow`` image built without a Docker engine, from ``deploy/images/Dockerfile`` as the one source.

The Dockerfile stays the definition (what a Docker or BuildKit user builds). This build reads from it what
it must agree on — the ``--package`` list of its ``uv sync``, the build stage's ``UV_*`` settings, the
runtime stage's ``ENV``, ``USER``, ``WORKDIR``, ``CMD`` and its ``groupadd``/``useradd`` — and does the
same with Debian parts instead of the ``python:<v>-slim-bookworm`` base image:

1. ``mmdebstrap`` a minimal Debian root filesystem of this machine's suite with ``python<v>`` (the
   machine's own APT sources; Debian bookworm's python3.11 is the project's Python);
2. ``uv sync --frozen --no-dev --no-editable --package ...`` into ``<rootfs>/app/.venv``, a relocatable
   venv over ``/usr/bin/python<v>`` (the same path inside the image);
3. the runtime user in ``/etc/passwd`` and ``/etc/group``, ``/app`` owned by it (``COPY --chown``);
4. one OCI layer (``images.oci_archive``), cached under ``<cache>/images`` by a hash of everything above.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from draflow_testenv.binaries import repo_root
from draflow_testenv.images import FORMAT, REGISTRY, images_dir, oci_archive, run

DRAFLOW_IMAGE = f"{REGISTRY}/draflow:e2e"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SOURCES = ("libs/draflow-runtime", "libs/draflow-protos", "services")


@dataclass
class Stage:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    workdir: str = ""
    cmd: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """(ARG defaults, stages) of the instructions this build needs."""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for word, rest in _instructions(text):
        if word == "ARG" and "=" in rest and not stages:
            k, _, v = rest.partition("=")
            args[k] = v
        elif word == "FROM":
            parts = rest.split()
            stages.append(Stage(parts[-1] if len(parts) >= 3 and parts[-2].upper() == "AS" else ""))
        elif not stages:
            continue
        elif word == "ENV":
            for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', rest):
                stages[-1].env[k] = v.strip('"')
        elif word == "USER":
            stages[-1].user = rest
        elif word == "WORKDIR":
            stages[-1].workdir = rest
        elif word == "CMD":
            stages[-1].cmd = json.loads(rest)
        elif word == "RUN":
            stages[-1].runs.append(rest)
    return args, stages


@dataclass(frozen=True)
class DraflowImagePlan:
    python: str  # e.g. "3.11"
    packages: list[str]
    uv_env: dict[str, str]
    runtime: Stage
    user: tuple[str, int, int]  # name, uid, gid

    @classmethod
    def from_dockerfile(cls, path: Path) -> DraflowImagePlan:
        args, stages = parse_dockerfile(path.read_text())
        build = next(s for s in stages if s.name == "build")
        packages = list(dict.fromkeys(re.findall(r"--package (\S+)", " ".join(build.runs))))
        uv_env = {k: v for k, v in build.env.items() if k.startswith("UV_") and k != "UV_PROJECT_ENVIRONMENT"}
        runtime = stages[-1]
        m = re.search(r"groupadd --gid (\d+) (\S+).*useradd --uid (\d+)", " ".join(runtime.runs))
        if not m or not packages:
            raise ValueError(f"{path}: no --package list or groupadd/useradd of the runtime user")
        return cls(python=args.get("PYTHON_VERSION", "3.11"), packages=packages, uv_env=uv_env,
                   runtime=runtime, user=(m.group(2), int(m.group(3)), int(m.group(1))))

    def image_config(self) -> dict[str, object]:
        env = {k: v.replace("$PATH", DEFAULT_PATH) for k, v in self.runtime.env.items()}
        return {"Env": [f"{k}={v}" for k, v in env.items()], "User": self.runtime.user,
                "WorkingDir": self.runtime.workdir, "Cmd": self.runtime.cmd}


def _source_hash(root: Path, dockerfile: Path) -> str:
    h = hashlib.sha256(f"format {FORMAT}".encode())
    files = [dockerfile, root / "uv.lock", root / "pyproject.toml"]
    for top in SOURCES:
        for dirpath, dirnames, filenames in os.walk(root / top):
            dirnames[:] = sorted(d for d in dirnames if d not in ("tests", "bench", "__pycache__")
                                 and not d.startswith("."))
            files += [Path(dirpath) / f for f in sorted(filenames) if not f.endswith(".pyc")]
    for f in files:
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _apt_sources() -> Path:
    for p in (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")):
        if p.is_file():
            return p
    raise FileNotFoundError("no Debian APT sources on this machine (/etc/apt/sources.list[.d])")


def _suite() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    return "bookworm"


async def draflow_archive(root: Path | None = None) -> Path:
    """Build (or reuse) the draflow image archive; see the module docstring."""
    root = root or repo_root()
    dockerfile = root / "deploy" / "images" / "Dockerfile"
    out = images_dir() / f"draflow-{_source_hash(root, dockerfile)}.tar"
    if out.is_file():
        return out
    plan = DraflowImagePlan.from_dockerfile(dockerfile)
    python = f"/usr/bin/python{plan.python}"
    uv = (await run([root / "hack" / "ensure-uv.sh"])).strip().splitlines()[-1]
    with tempfile.TemporaryDirectory(prefix="draflow-image-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        await run(["mmdebstrap", "--variant=minbase", f"--include=python{plan.python}",
                   *(f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "locale", "info")),
                   _suite(), rootfs, _apt_sources()])
        venv = rootfs / "app" / ".venv"
        env = {**os.environ, **plan.uv_env, "UV_PROJECT_ENVIRONMENT": str(venv)}
        await run([uv, "venv", "--quiet", "--relocatable", "--python", python, venv], cwd=root, env=env)
        await run([uv, "sync", "--quiet", "--frozen", "--no-dev", "--no-editable", "--python", python,
                   *(a for p in plan.packages for a in ("--package", p))], cwd=root, env=env)
        return await asyncio.to_thread(_finish, rootfs, plan, out)


def _finish(rootfs: Path, plan: DraflowImagePlan, out: Path) -> Path:
    name, uid, gid = plan.user
    with open(rootfs / "etc" / "group", "a") as f:
        f.write(f"{name}:x:{gid}:\n")
    with open(rootfs / "etc" / "passwd", "a") as f:
        f.write(f"{name}:x:{uid}:{gid}::/nonexistent:/sbin/nologin\n")
    for cache in (rootfs / "var" / "cache" / "apt", rootfs / "var" / "lib" / "apt" / "lists"):
        shutil.rmtree(cache, ignore_errors=True)
    archive = oci_archive(rootfs, DRAFLOW_IMAGE, out, config=plan.image_config(), owners={"app/.venv": uid})
    # Each is ~400 MB: drop those of other sources unused for an hour (not one a parallel run may import).
    for old in out.parent.glob("draflow-*.tar"):
        with contextlib.suppress(OSError):
            if old != archive and time.time() - old.stat().st_mtime > 3600:
                old.unlink()
    return archive
