"""Images without a Docker engine: the OCI archive format and what the draflow image takes from the
Dockerfile (pure; building and running the images is tests/e2e)."""

from __future__ import annotations

import hashlib
import json
import tarfile
import tomllib
from pathlib import Path

from draflow_testenv.binaries import repo_root
from draflow_testenv.image_draflow import DraflowImagePlan
from draflow_testenv.images import oci_archive


def test_oci_archive_blobs_match_their_digests_and_ownership_follows_owners(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "app" / ".venv").mkdir(parents=True)
    (root / "app" / ".venv" / "x").write_text("x")
    (root / "etc").mkdir()
    out = oci_archive(root, "draflow.local/t:1", tmp_path / "t.tar", config={"Cmd": ["/x"]},
                      owners={"app/.venv": 65532})
    with tarfile.open(out) as tar:
        blobs = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    for name, data in blobs.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    index = json.loads(blobs["index.json"])
    entry = index["manifests"][0]
    assert entry["annotations"]["io.containerd.image.name"] == "draflow.local/t:1"
    manifest = json.loads(blobs["blobs/sha256/" + entry["digest"][7:]])
    config = json.loads(blobs["blobs/sha256/" + manifest["config"]["digest"][7:]])
    assert config["config"] == {"Cmd": ["/x"]}
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    layer = tmp_path / "layer.tar"
    layer.write_bytes(blobs["blobs/sha256/" + manifest["layers"][0]["digest"][7:]])
    with tarfile.open(layer) as tar:
        owners = {m.name: m.uid for m in tar.getmembers()}
    assert owners == {"app": 0, "app/.venv": 65532, "app/.venv/x": 65532, "etc": 0}


def test_the_draflow_image_plan_is_read_from_the_dockerfile() -> None:
    plan = DraflowImagePlan.from_dockerfile(repo_root() / "deploy" / "images" / "Dockerfile")
    pyprojects = sorted((repo_root() / "services").glob("*/pyproject.toml"))
    names = sorted(tomllib.loads(p.read_text())["project"]["name"] for p in pyprojects)
    assert sorted(plan.packages) == names
    assert plan.user == ("draflow", 65532, 65532)
    config = plan.image_config()
    assert config["User"] == "65532:65532" and config["WorkingDir"] == "/app"
    env = dict(e.split("=", 1) for e in config["Env"])  # type: ignore[union-attr]
    assert env["PATH"].startswith("/app/.venv/bin:") and "$PATH" not in env["PATH"]
    assert plan.uv_env.get("UV_COMPILE_BYTECODE") == "1"
