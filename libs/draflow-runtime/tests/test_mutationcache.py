"""The mutation cache bridges informer lag after this process's own writes (claim-controller's claims,
slice-publisher's slices)."""

import tracemalloc
from collections.abc import Iterable, Mapping
from typing import Any

from draflow_runtime.mutationcache import MutationCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def owner_uid(obj: Mapping[str, Any]) -> Iterable[str]:
    return [r["uid"] for r in obj["metadata"].get("ownerReferences") or () if r.get("controller")]


def claims_cache(ttl: float = 60, clock: Any = None) -> MutationCache:
    if clock is None:
        return MutationCache(ttl=ttl, index=owner_uid)
    return MutationCache(ttl=ttl, clock=clock, index=owner_uid)


def claim(name: str, rv: str, owner_uid: str = "pod-uid", uid: str = "c-uid") -> dict:
    return {
        "metadata": {
            "name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid,
                                 "controller": True}],
        }
    }


def test_created_claim_is_found_before_the_informer_sees_it() -> None:
    cache = claims_cache()
    created = claim("p-gpu-x", "10")
    cache.mutated(created)
    assert cache.get("ns/p-gpu-x", None) is created
    assert cache.by_index("pod-uid", []) == [created]
    assert cache.by_index("other-pod", []) == []


def test_informer_copy_wins_once_it_caught_up() -> None:
    cache = claims_cache()
    cache.mutated(claim("c", "10"))
    informer = claim("c", "11")
    assert cache.get("ns/c", informer) is informer
    assert len(cache) == 0


def test_newer_write_wins_over_a_stale_informer() -> None:
    cache = claims_cache()
    written = claim("c", "12")
    cache.mutated(written)
    assert cache.get("ns/c", claim("c", "11")) is written
    assert cache.by_index("pod-uid", [claim("c", "11")]) == [written]


def test_entries_expire_after_the_ttl() -> None:
    clock = Clock()
    cache = claims_cache(ttl=5, clock=clock)
    cache.mutated(claim("c", "10"))
    clock.now = 6
    assert cache.get("ns/c", None) is None
    assert cache.by_index("pod-uid", []) == []


def test_forget_drops_a_deleted_claim() -> None:
    cache = claims_cache()
    cache.mutated(claim("c", "10"))
    cache.forget("ns/c")
    assert cache.get("ns/c", None) is None


def test_replaced_object_is_not_shadowed() -> None:
    # Someone deleted our claim and created another under its name after our write: a later
    # resourceVersion (one sequence per resource in the API server).
    cache = claims_cache()
    cache.mutated(claim("c", "10", uid="old"))
    new = claim("c", "15", uid="new")
    assert cache.get("ns/c", new) is new


def test_a_stale_informer_copy_of_another_uid_does_not_hide_our_newer_write() -> None:
    """Regression (claim-controller's cache compared UIDs first): the informer still shows an object that
    was deleted before we created ours under the same name; our create is the newer and must win."""
    cache = claims_cache()
    ours = claim("c", "20", uid="ours")
    cache.mutated(ours)
    assert cache.get("ns/c", claim("c", "8", uid="gone-meanwhile")) is ours


# --- slice-publisher's use: cluster-scoped slices, deletes, the informer's resourceVersion -----------


def pool_of(obj: Mapping[str, Any]) -> Iterable[str]:
    return [obj["metadata"]["labels"]["pool"]]


def a_slice(name: str, rv: str, uid: str) -> dict:
    return {"metadata": {"name": name, "uid": uid, "resourceVersion": rv, "labels": {"pool": "p"}}}


def test_a_deleted_object_is_hidden_until_the_informer_drops_it() -> None:
    cache = MutationCache(ttl=60, index=pool_of)
    old = a_slice("s-0", "5", "u1")
    other = a_slice("s-1", "6", "u2")
    cache.deleted(old)
    assert cache.by_index("p", [old, other], seen_rv="5") == [other]
    assert len(cache) == 1
    assert cache.by_index("p", [other], seen_rv="9") == [other]
    assert len(cache) == 0


def test_deleted_then_created_again_under_the_same_name_shows_the_new_object() -> None:
    cache = MutationCache(ttl=60, index=pool_of)
    old = a_slice("s-0", "5", "u1")
    cache.deleted(old)
    new = a_slice("s-0", "7", "u3")
    cache.mutated(new)
    assert cache.by_index("p", [old], seen_rv="5") == [new]


def test_a_write_the_informer_has_passed_is_history_even_when_the_object_is_gone() -> None:
    cache = MutationCache(ttl=60, index=pool_of)
    cache.mutated(a_slice("s-0", "7", "u1"))
    assert cache.by_index("p", [], seen_rv="6") == [a_slice("s-0", "7", "u1")]
    assert cache.by_index("p", [], seen_rv="8") == []
    assert len(cache) == 0


def test_a_deleted_object_shows_again_after_the_ttl() -> None:
    clock = Clock()
    cache = MutationCache(ttl=60, clock=clock, index=pool_of)
    old = a_slice("s-0", "5", "u1")
    cache.deleted(old)
    clock.now = 61
    assert cache.by_index("p", [old]) == [old]


def test_a_lookup_in_a_big_cache_neither_copies_nor_walks_its_entries() -> None:
    """Every lookup expires old entries first; with 50,000 live entries that must cost nothing in
    proportion to the cache (it once copied every entry on every lookup). Measured as memory allocated
    during the lookups, not time."""
    clock = Clock()
    cache = claims_cache(ttl=60, clock=clock)
    for i in range(50_000):
        cache.mutated(claim(f"c-{i}", str(i + 1), owner_uid=f"pod-{i}", uid=f"uid-{i}"))
    tracemalloc.start()
    try:
        for i in range(100):
            assert cache.get(f"ns/c-{i}", None) is not None
            cache.by_index(f"pod-{i}", [])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024  # a copy of 50,000 (key, entry) pairs alone is several MB


def test_expiry_pops_only_what_is_due_in_deadline_order() -> None:
    clock = Clock()
    cache = claims_cache(ttl=10, clock=clock)
    for i in range(5):
        clock.now = float(i)
        cache.mutated(claim(f"c-{i}", "5", uid=f"uid-{i}"))
    clock.now = 4.0
    cache.mutated(claim("c-0", "6", uid="uid-0"))  # re-recorded: now the last to expire (deadline 14)
    clock.now = 12.5  # deadlines 11 and 12 (c-1, c-2) have passed
    assert cache.get("ns/c-1", None) is None
    assert cache.get("ns/c-2", None) is None
    assert [cache.get(f"ns/c-{i}", None) is not None for i in (0, 3, 4)] == [True, True, True]
    assert len(cache) == 3
    clock.now = 14.0
    assert len(cache) == 0
