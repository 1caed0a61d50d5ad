"""Semantic versions (semver 2.0.0) as used by DRA ``version`` attributes and the CEL ``semver`` library.

Strict parsing matches ``github.com/blang/semver/v4`` ``Parse`` (used by the apiserver for version
attributes and by ``semver(s)``): ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``, no leading zeros in
numeric parts. ``parse_semver(s, normalize=True)`` follows the Kubernetes CEL ``semver(s, true)``
normalisation: a leading ``v`` is dropped, missing minor/patch become 0 and leading zeros are removed.
Ordering follows semver precedence; build metadata is ignored when comparing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["SemverError", "Version", "parse_semver"]

_IDENT = re.compile(r"^[0-9A-Za-z-]+$")
_NUM = re.compile(r"^(0|[1-9][0-9]*)$")


class SemverError(ValueError):
    """A string is not a valid semantic version."""


@dataclass(frozen=True, slots=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[str | int, ...] = ()
    build: tuple[str, ...] = ()

    def compare(self, other: Version) -> int:
        a = (self.major, self.minor, self.patch)
        b = (other.major, other.minor, other.patch)
        if a != b:
            return -1 if a < b else 1
        if self.pre == other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for x, y in zip(self.pre, other.pre, strict=False):
            if x == y:
                continue
            if isinstance(x, int) and isinstance(y, int):
                return -1 if x < y else 1
            if isinstance(x, int):
                return -1  # numeric identifiers have lower precedence
            if isinstance(y, int):
                return 1
            return -1 if x < y else 1
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __str__(self) -> str:
        s = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            s += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            s += "+" + ".".join(self.build)
        return s


@lru_cache(maxsize=4096)
def parse_semver(text: str, normalize: bool = False) -> Version:
    """Parse ``text``; raises :class:`SemverError` if it is not a semantic version."""
    s = text
    if normalize:
        s = _normalize(s)
    if not s:
        raise SemverError("Version string empty")
    build: tuple[str, ...] = ()
    if "+" in s:
        s, _, b = s.partition("+")
        parts = b.split(".")
        if any(not _IDENT.match(p) for p in parts):
            raise SemverError(f"Invalid character(s) found in build meta data {b!r}")
        build = tuple(parts)
    pre: tuple[str | int, ...] = ()
    if "-" in s:
        s, _, p = s.partition("-")
        items: list[str | int] = []
        for part in p.split("."):
            if not _IDENT.match(part):
                raise SemverError(f"Invalid character(s) found in prerelease {part!r}")
            if part.isdigit():
                if not _NUM.match(part):
                    raise SemverError(f"Prerelease version can not contain leading zeroes {part!r}")
                items.append(int(part))
            else:
                items.append(part)
        pre = tuple(items)
    nums = s.split(".")
    if len(nums) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    values = []
    for n in nums:
        if not n.isdigit() or not n.isascii():
            raise SemverError(f"Invalid character(s) found in version element {n!r}")
        if not _NUM.match(n):
            raise SemverError(f"Version element can not contain leading zeroes {n!r}")
        values.append(int(n))
    return Version(values[0], values[1], values[2], pre, build)


def _normalize(s: str) -> str:
    s = s.removeprefix("v")
    # Split off prerelease/build before padding the numeric core.
    idx = min((i for i in (s.find("-"), s.find("+")) if i >= 0), default=len(s))
    core, rest = s[:idx], s[idx:]
    parts = core.split(".")
    if len(parts) > 3:
        return s
    parts = [p.lstrip("0") or "0" if p.isdigit() else p for p in parts]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts) + rest
