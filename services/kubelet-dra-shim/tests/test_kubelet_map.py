"""Every case of kubelet v1.37.1's DRA manager tests is mapped exactly once (:mod:`kubelet_map`): restated
by named draflow tests that exist, a difference the README documents, or a stated non-case; and the
checked-in names are those of the Go sources when the Go module cache has them."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

from kubelet_map import COVERED, DIFFERS, NOT_APPLICABLE, TO_RESTATE, UPSTREAM_CASES

from draflow_testenv.upstreammap import absent_tests, mapping_problems

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "services/kubelet-dra-shim/README.md"


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("kubelet_dra_cases", ROOT / "hack/kubelet_dra_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_upstream_names_are_unique_and_counted() -> None:
    assert len(set(UPSTREAM_CASES)) == len(UPSTREAM_CASES) == 194
    functions = Counter(name.split("/", 1)[0] for name in UPSTREAM_CASES)
    assert len(functions) == 60
    assert functions["TestPrepareResources"] == 16 and functions["TestUnprepareResources"] == 9


def test_checked_in_names_are_the_go_sources_when_the_module_cache_has_them() -> None:
    generator = _generator()
    module = generator.module_dir()
    if module is None:  # a machine without the Go module cache: the checked-in list is all there is
        return
    assert tuple(generator.upstream_cases(module)) == UPSTREAM_CASES, (
        "regenerate: python hack/kubelet_dra_cases.py --module > <shim>/tests/kubelet_cases.py")


def test_the_generator_reads_tables_map_keys_and_nested_runs() -> None:
    source = '''
func TestA(t *testing.T) {
	for _, tc := range []struct{ description string }{
		{
			description: "first",
		},
		{
			description: "second",
		},
	} {
		t.Run(tc.description, func(t *testing.T) {})
	}
}

func TestB(t *testing.T) {
	for name, tc := range map[string]struct{ want string }{
		"k1": {want: "x"},
		"k2": {want: "y"},
	} {
		t.Run(name, func(t *testing.T) {})
	}
}

func TestC(t *testing.T) {
	t.Run("outer", func(t *testing.T) {
		t.Run("inner", func(t *testing.T) {})
	})
	t.Run("alone", func(t *testing.T) {})
}

func TestD(t *testing.T) {
}
'''
    assert _generator().cases_of(source) == [
        "TestA/first", "TestA/second", "TestB/k1", "TestB/k2", "TestC/outer/inner", "TestC/alone", "TestD"]


def test_every_upstream_case_is_mapped_exactly_once() -> None:
    problems = mapping_problems(UPSTREAM_CASES, COVERED, DIFFERS, NOT_APPLICABLE, TO_RESTATE)
    assert not problems, problems
    assert not TO_RESTATE, f"not restated yet: {sorted(TO_RESTATE)}"


def test_reasons_say_what_they_are_and_differences_are_in_the_readme() -> None:
    assert all(reason.startswith("differs: ") for reason in DIFFERS.values())
    assert all(reason.startswith("n/a: ") for reason in NOT_APPLICABLE.values())
    assert all(TO_RESTATE.values())
    readme = README.read_text()
    for reason in DIFFERS.values():
        phrase = reason.rpartition("README: ")[2]
        assert phrase and phrase in readme, f"the README does not document: {phrase!r}"


def test_every_named_test_exists() -> None:
    absent = absent_tests(ROOT, COVERED, DIFFERS, NOT_APPLICABLE)
    assert not absent, f"named tests that do not exist: {absent}"
