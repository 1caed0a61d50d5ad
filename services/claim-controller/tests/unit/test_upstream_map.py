"""Every case of upstream's resourceclaim controller tests is mapped exactly once: restated by named draflow
tests that exist, or a stated difference ("differs: ...") or non-case ("n/a: ...")."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from upstream_map import COVERED, DIFFERS, NOT_APPLICABLE, TO_RESTATE, UPSTREAM_CASES

ROOT = Path(__file__).resolve().parents[4]


def test_upstream_names_are_unique_and_complete() -> None:
    assert len(set(UPSTREAM_CASES)) == len(UPSTREAM_CASES) == 111
    functions = Counter(name.split("/", 1)[0] for name in UPSTREAM_CASES)
    assert functions == {"TestCreateClaimDoesNotMutateTemplate": 2, "TestSyncHandler": 56,
                         "TestClaimExists": 6, "TestEventHandlers": 35, "TestWorkqueue": 5,
                         "TestGetAdminAccessMetricLabel": 7}


def test_every_upstream_case_is_mapped_exactly_once() -> None:
    places = Counter([*COVERED, *DIFFERS, *NOT_APPLICABLE, *TO_RESTATE])
    missing = [name for name in UPSTREAM_CASES if name not in places]
    twice = sorted(name for name, n in places.items() if n > 1)
    unknown = sorted(set(places) - set(UPSTREAM_CASES))
    assert not missing, f"{len(missing)} upstream cases not mapped: {missing}"
    assert not twice, f"mapped more than once: {twice}"
    assert not unknown, f"mapped names that are not upstream cases: {unknown}"


def test_reasons_say_what_they_are() -> None:
    assert all(reason.startswith("differs: ") for reason in DIFFERS.values())
    assert all(reason.startswith("n/a: ") for reason in NOT_APPLICABLE.values())


def test_every_named_test_exists() -> None:
    named = {test for tests in COVERED.values() for test in tests}
    named |= {ref for reason in [*DIFFERS.values(), *NOT_APPLICABLE.values()]
              for ref in re.findall(r"[\w/.-]+\.py::\w+", reason)}
    absent = []
    for ref in sorted(named):
        path, _, function = ref.partition("::")
        file = ROOT / path
        if not file.is_file() or not re.search(rf"^(async )?def {function}\(", file.read_text(), re.M):
            absent.append(ref)
    assert not absent, f"named tests that do not exist: {absent}"
    assert all(COVERED.values()), "a covered case names no test"
