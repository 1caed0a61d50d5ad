"""binaries.py computes the cache paths hack/binaries.sh builds into, without running the script."""

from __future__ import annotations

import subprocess

import pytest

from draflow_testenv.binaries import binary_path, repo_root


@pytest.mark.parametrize("name", ["go-dra-driver", "go-api-check", "go-alloc-diff"])
def test_go_module_version_is_the_one_binaries_sh_computes(name: str) -> None:
    script = repo_root() / "hack" / "binaries.sh"
    out = subprocess.run([str(script), "path", name], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == str(binary_path(name))
