"""Every case of upstream's allocator table is mapped: covered by draflow case(s), or a stated difference."""

from __future__ import annotations

from conformance_map import DIFFERS, UPSTREAM_CASES, mapping


def test_every_upstream_case_is_mapped() -> None:
    m = mapping()
    missing = [name for name in UPSTREAM_CASES if name not in m]
    assert not missing, f"{len(missing)} upstream cases not mapped: {missing}"


def test_mapping_names_only_upstream_cases() -> None:
    unknown = sorted(set(mapping()) - set(UPSTREAM_CASES))
    assert not unknown, f"mapped names that are not upstream cases: {unknown}"


def test_a_difference_is_not_also_claimed_as_covered() -> None:
    m = mapping()
    both = [name for name in DIFFERS if isinstance(m[name], list)]
    assert not both, f"listed as covered and as different: {both}"
    assert all(reason.startswith("differs: ") for reason in DIFFERS.values())


def test_upstream_names_are_unique() -> None:
    assert len(set(UPSTREAM_CASES)) == len(UPSTREAM_CASES) == 279
