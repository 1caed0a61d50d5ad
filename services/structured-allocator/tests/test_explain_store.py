"""ExplanationStore: one entry per unplaced claim, forgotten by claim or by pod, bounded."""

from __future__ import annotations

from structured_allocator.explain_http import ExplanationStore, PodExplanation


def _explain(pod: str, *claims: str) -> PodExplanation:
    return PodExplanation(pod, list(claims), nodes_total=1, waiting="no devices")


def test_forget_pod_drops_every_claim_it_explained_and_nothing_else() -> None:
    store = ExplanationStore()
    store.record(_explain("ns/a", "ns/a-1", "ns/a-2"))
    store.record(_explain("ns/b", "ns/b-1"))
    store.forget_pod("ns/a")
    assert store.get("ns/a-1") is None and store.get("ns/a-2") is None
    assert [item["claim"] for item in store.latest()] == ["ns/b-1"]
    store.forget_pod("ns/a")  # twice, or an unknown pod: nothing happens
    store.forget_pod("ns/nobody")
    assert len(store) == 1


def test_a_shared_claim_belongs_to_the_pod_that_explained_it_last() -> None:
    store = ExplanationStore()
    store.record(_explain("ns/a", "ns/shared"))
    store.record(_explain("ns/b", "ns/shared"))
    store.forget_pod("ns/a")
    entry = store.get("ns/shared")
    assert entry is not None and entry["pod"] == "ns/b"
    store.forget(["ns/shared"])
    store.forget_pod("ns/b")
    assert len(store) == 0


def test_capacity_drops_the_oldest_and_its_pod_index() -> None:
    store = ExplanationStore(capacity=2)
    store.record(_explain("ns/a", "ns/a-1"))
    store.record(_explain("ns/b", "ns/b-1"))
    store.record(_explain("ns/a", "ns/a-1"))  # refreshed: now the newest
    store.record(_explain("ns/c", "ns/c-1"))
    assert [item["claim"] for item in store.latest()] == ["ns/c-1", "ns/a-1"]
    store.forget_pod("ns/b")  # already evicted: harmless
    store.forget_pod("ns/a")
    assert [item["claim"] for item in store.latest()] == ["ns/c-1"]
