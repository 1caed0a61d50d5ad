"""The mutation cache bridges informer lag after a create."""

from claim_controller.mutation_cache import MutationCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def claim(name: str, rv: str, owner_uid: str = "pod-uid", uid: str = "c-uid") -> dict:
    return {
        "metadata": {
            "name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid,
                                 "controller": True}],
        }
    }


def test_created_claim_is_found_before_the_informer_sees_it() -> None:
    cache = MutationCache(ttl=60)
    created = claim("p-gpu-x", "10")
    cache.mutated(created)
    assert cache.get("ns/p-gpu-x", None) is created
    assert cache.by_owner("pod-uid", []) == [created]
    assert cache.by_owner("other-pod", []) == []


def test_informer_copy_wins_once_it_caught_up() -> None:
    cache = MutationCache(ttl=60)
    cache.mutated(claim("c", "10"))
    informer = claim("c", "11")
    assert cache.get("ns/c", informer) is informer
    assert len(cache) == 0


def test_newer_write_wins_over_a_stale_informer() -> None:
    cache = MutationCache(ttl=60)
    written = claim("c", "12")
    cache.mutated(written)
    assert cache.get("ns/c", claim("c", "11")) is written
    assert cache.by_owner("pod-uid", [claim("c", "11")]) == [written]


def test_entries_expire_after_the_ttl() -> None:
    clock = Clock()
    cache = MutationCache(ttl=5, clock=clock)
    cache.mutated(claim("c", "10"))
    clock.now = 6
    assert cache.get("ns/c", None) is None
    assert cache.by_owner("pod-uid", []) == []


def test_forget_drops_a_deleted_claim() -> None:
    cache = MutationCache(ttl=60)
    cache.mutated(claim("c", "10"))
    cache.forget("ns/c")
    assert cache.get("ns/c", None) is None


def test_replaced_object_is_not_shadowed() -> None:
    cache = MutationCache(ttl=60)
    cache.mutated(claim("c", "10", uid="old"))
    new = claim("c", "5", uid="new")
    assert cache.get("ns/c", new) is new
