"""The feature gates the test environment switches on follow the pinned kube-apiserver's DRA gates."""

from __future__ import annotations

import pytest

from draflow_testenv.binaries import ensure_binary
from draflow_testenv.featuregates import NOT_WANTED_GATES, WANTED_GATES, accepted_gates, binary_dra_gates


@pytest.mark.integration
async def test_every_dra_gate_of_the_pinned_apiserver_is_on_or_named_as_not_yet() -> None:
    binary = await ensure_binary("kube-apiserver")
    listed = await binary_dra_gates(binary)
    assert len(listed) >= 10, f"--help parsing found too few DRA gates: {sorted(listed)}"
    unknown = sorted(listed - set(WANTED_GATES) - set(NOT_WANTED_GATES))
    assert not unknown, f"DRA gates of {binary} neither in WANTED_GATES nor NOT_WANTED_GATES: {unknown}"
    stale = sorted(set(NOT_WANTED_GATES) - listed)
    assert not stale, f"NOT_WANTED_GATES names gates {binary} does not have: {stale}"


@pytest.mark.integration
async def test_the_pinned_apiserver_accepts_every_wanted_gate() -> None:
    binary = await ensure_binary("kube-apiserver")
    accepted, rejected = await accepted_gates(binary)
    assert rejected == [] and accepted == list(WANTED_GATES)


def test_a_gate_is_either_wanted_or_not_yet() -> None:
    assert not set(WANTED_GATES) & set(NOT_WANTED_GATES)
    assert len(set(WANTED_GATES)) == len(WANTED_GATES)
