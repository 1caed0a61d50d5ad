"""Every case of kube-scheduler's DynamicResources plugin tests is mapped exactly once, and every mapping
points at something real: an existing draflow test, a covered allocator conformance case, or a
difference the README documents."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conformance_map import mapping as allocator_mapping
from plugin_map import COVERED, DIFFERS, NOT_APPLICABLE, NOT_YET, UPSTREAM_CASES, mapping

TESTS = Path(__file__).parent
README = TESTS.parent / "README.md"


def _tables() -> list[dict[str, object]]:
    return [COVERED, DIFFERS, NOT_APPLICABLE, NOT_YET]  # type: ignore[list-item]


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and n.name.startswith("test_")}


def test_upstream_names_are_unique_and_counted() -> None:
    assert len(set(UPSTREAM_CASES)) == len(UPSTREAM_CASES) == 270
    assert sum(name.startswith("TestPlugin/") for name in UPSTREAM_CASES) == 94


def test_every_upstream_case_is_mapped_exactly_once() -> None:
    counts = {name: sum(name in t for t in _tables()) for name in UPSTREAM_CASES}
    unmapped = [name for name, n in counts.items() if n == 0]
    twice = [name for name, n in counts.items() if n > 1]
    assert not unmapped, f"{len(unmapped)} upstream cases not mapped: {unmapped}"
    assert not twice, f"mapped more than one way: {twice}"
    unknown = sorted(set(mapping()) - set(UPSTREAM_CASES))
    assert not unknown, f"mapped names that are not upstream cases: {unknown}"


def test_every_covering_test_exists() -> None:
    names: dict[str, set[str]] = {}
    allocator = allocator_mapping()
    missing = []
    for case, refs in COVERED.items():
        assert refs, f"{case}: no covering test"
        for ref in refs:
            if ref.startswith("conformance:"):
                covered = allocator.get(ref.removeprefix("conformance:"))
                if not isinstance(covered, list) or not covered:
                    missing.append(f"{case} -> {ref} (not a covered allocator case)")
                continue
            file, _, test = ref.partition("::")
            if file not in names:
                path = TESTS / file
                names[file] = _test_names(path) if path.is_file() else set()
            if test not in names[file]:
                missing.append(f"{case} -> {ref}")
    assert not missing, "covering tests that do not exist:\n" + "\n".join(missing)


def test_every_difference_is_documented_in_the_readme() -> None:
    readme = re.sub(r"\s+", " ", README.read_text()).replace("`", "")
    undocumented = {d.readme for d in DIFFERS.values() if re.sub(r"\s+", " ", d.readme) not in readme}
    assert not undocumented, f"differences the README does not state: {undocumented}"


def test_texts_say_what_they_are() -> None:
    assert all(t.startswith("n/a: ") for t in NOT_APPLICABLE.values())
    assert all(t.startswith("missing: ") for t in NOT_YET.values())
