"""The pool hash of a published slice comes from its name, which nobody can change, before its label."""

from __future__ import annotations

from typing import Any

import pytest

from slice_publisher.naming import POOL_HASH_LABEL, pool_hash, pool_hash_of, slice_name

DRIVER, POOL, NODE = "gpu.draflow.example", "node-a", "node-a"
HASH = pool_hash(DRIVER, POOL, NODE)


def obj(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}}


@pytest.mark.parametrize(("slice_obj", "expected"), [
    (obj(slice_name(DRIVER, POOL, NODE, 0), {POOL_HASH_LABEL: HASH}), HASH),
    (obj(slice_name(DRIVER, POOL, NODE, 0x1a)), HASH),  # label removed by a user
    (obj(slice_name(DRIVER, POOL, NODE, 3), {POOL_HASH_LABEL: "0000000000"}), HASH),  # label changed
    (obj(slice_name(DRIVER, POOL, "n" * 300, 0)), pool_hash(DRIVER, POOL, "n" * 300)),  # owner shortened
    (obj("made-by-hand", {POOL_HASH_LABEL: HASH}), HASH),  # not our name: the label
    (obj("x-0123456789-01", {POOL_HASH_LABEL: "fromlabel"}), "fromlabel"),  # index with a leading zero
], ids=["both", "no-label", "wrong-label", "long-owner", "foreign-name", "not-an-index"])
def test_the_pool_hash_is_read_from_the_name_first(slice_obj: dict[str, Any], expected: str) -> None:
    assert pool_hash_of(slice_obj) == expected


def test_a_slice_with_neither_has_no_pool_hash() -> None:
    with pytest.raises(KeyError):
        pool_hash_of(obj("made-by-hand"))
