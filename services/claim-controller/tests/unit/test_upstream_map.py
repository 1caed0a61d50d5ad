"""Every case of upstream's resourceclaim controller tests is mapped exactly once: restated by named draflow
tests that exist, or a stated difference ("differs: ...") or non-case ("n/a: ...")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from upstream_map import COVERED, DIFFERS, NOT_APPLICABLE, TO_RESTATE, UPSTREAM_CASES

from draflow_testenv.upstreammap import absent_tests, mapping_problems

ROOT = Path(__file__).resolve().parents[4]


def test_upstream_names_are_unique_and_complete() -> None:
    assert len(set(UPSTREAM_CASES)) == len(UPSTREAM_CASES) == 111
    functions = Counter(name.split("/", 1)[0] for name in UPSTREAM_CASES)
    assert functions == {"TestCreateClaimDoesNotMutateTemplate": 2, "TestSyncHandler": 56,
                         "TestClaimExists": 6, "TestEventHandlers": 35, "TestWorkqueue": 5,
                         "TestGetAdminAccessMetricLabel": 7}


def test_every_upstream_case_is_mapped_exactly_once() -> None:
    problems = mapping_problems(UPSTREAM_CASES, COVERED, DIFFERS, NOT_APPLICABLE, TO_RESTATE)
    assert not problems, problems


def test_reasons_say_what_they_are() -> None:
    assert all(reason.startswith("differs: ") for reason in DIFFERS.values())
    assert all(reason.startswith("n/a: ") for reason in NOT_APPLICABLE.values())


def test_every_named_test_exists() -> None:
    absent = absent_tests(ROOT, COVERED, DIFFERS, NOT_APPLICABLE)
    assert not absent, f"named tests that do not exist: {absent}"
