"""binaries.py computes the cache paths hack/binaries.sh builds into, without running the script."""

from __future__ import annotations

import subprocess

from draflow_testenv.binaries import binary_path, repo_root


def test_go_module_version_is_the_one_binaries_sh_computes() -> None:
    script = repo_root() / "hack" / "binaries.sh"
    out = subprocess.run([str(script), "path", "go-dra-driver"], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == str(binary_path("go-dra-driver"))
