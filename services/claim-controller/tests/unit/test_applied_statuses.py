"""AppliedStatuses: a pod status this process applied is not applied again until the cache shows it."""

from __future__ import annotations

from typing import Any

from claim_controller.context import AppliedStatuses


def pod(uid: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": version}}


def test_an_apply_the_cache_does_not_show_yet_is_not_repeated() -> None:
    applied = AppliedStatuses()
    applied.record(pod("u1", "20"), {"gpu": "p-gpu-x"})
    assert applied.landed(pod("u1", "19"), {"gpu": "p-gpu-x"})
    assert applied.landed(pod("u1", "19"), {"gpu": "p-gpu-x"})  # asked again: still in flight


def test_other_names_another_pod_or_nothing_recorded_are_applied() -> None:
    applied = AppliedStatuses()
    applied.record(pod("u1", "20"), {"gpu": "p-gpu-x"})
    assert not applied.landed(pod("u1", "19"), {"gpu": "p-gpu-y"})
    assert not applied.landed(pod("u1", "19"), {"gpu": "p-gpu-x", "nic": "p-nic-z"})
    assert not applied.landed(pod("u2", "19"), {"gpu": "p-gpu-x"})  # a new pod of the same name
    assert not AppliedStatuses().landed(pod("u1", "19"), {"gpu": "p-gpu-x"})  # after a restart


def test_once_the_cache_caught_up_it_decides_again() -> None:
    """The cache at or past the write and still without the names: someone changed the status since."""
    applied = AppliedStatuses()
    applied.record(pod("u1", "20"), {"gpu": "p-gpu-x"})
    assert not applied.landed(pod("u1", "20"), {"gpu": "p-gpu-x"})
    assert not applied.landed(pod("u1", "19"), {"gpu": "p-gpu-x"})  # forgotten once caught up
    applied.record(pod("u1", "30"), {"gpu": "p-gpu-x"})
    assert not applied.landed(pod("u1", "31"), {"gpu": "p-gpu-x"})


def test_versions_that_are_not_numbers_never_skip_a_write() -> None:
    applied = AppliedStatuses()
    applied.record(pod("u1", "abc"), {"gpu": "p-gpu-x"})
    assert not applied.landed(pod("u1", "1"), {"gpu": "p-gpu-x"})
    applied.record(pod("u1", "20"), {"gpu": "p-gpu-x"})
    assert not applied.landed(pod("u1", "x"), {"gpu": "p-gpu-x"})


def test_bounded() -> None:
    applied = AppliedStatuses(size=2)
    for i in range(3):
        applied.record(pod(f"u{i}", "20"), {"gpu": "c"})
    assert not applied.landed(pod("u0", "19"), {"gpu": "c"})  # the oldest went
    assert applied.landed(pod("u2", "19"), {"gpu": "c"})
