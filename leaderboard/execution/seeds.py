"""Agent seeds, parsed once: `AgentSeeds.parse` reads what a user gave (`"0,1,2"`, `"0-4"`
inclusive, an int or a list of ints) into one typed value that a sweep passes on.

A sweep checks its seeds in two steps, in the order the command line's errors come: first
how many seeds there are (`counted`: a range written backwards is refused; ranges are
counted, not expanded, so `--seeds 0-10000000` is refused by the sweep's size, not grown
in memory), then, after the problems and the size, the seeds themselves (`values`: each
seed once, in order, or one error saying what is allowed).

Imports only the standard library when it is loaded (its errors' module when one is
raised): the command line's index (`experiments.catalog`) loads this file by its path to
count a sweep's seeds as the library does, before any package is imported.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from typing import Any

MAX_SEEDS = 100_000  # more agent seeds than this is a typo, not a sweep
ALLOWED = "integers >= 0 like 0,1,2 or a range like 0-4"


@dataclasses.dataclass(frozen=True)
class AgentSeeds:
    """Agent seeds as given, parsed: `count` seeds (repeats counted, ranges not expanded)
    in the (low, high) `ranges`; `early` is the error said before the sweep's size (a range
    written backwards, an empty item, a value that is no list), `refused` what is allowed
    when the seeds are not seeds (said by `values`)."""

    given: Any
    count: int = 0
    ranges: tuple[tuple[int, int], ...] = ()
    early: str | None = None
    refused: str | None = None

    @classmethod
    def parse(cls, given: Any) -> AgentSeeds:
        """`given` read once (no error raised here: `counted` and `values` say them)."""
        if isinstance(given, AgentSeeds):
            return given
        if isinstance(given, int) and not isinstance(given, bool):
            given = [given]
        if isinstance(given, str):
            return _of_text(given)
        try:
            listed = list(given)
        except TypeError:  # not a list of seeds at all
            message = f"seeds: got {given!r}; allowed: {ALLOWED}"
            return cls(given, early=message, refused=ALLOWED)
        ok = all(isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 0
                 for s in listed)  # fmt: skip
        ranges = tuple((int(s), int(s)) for s in listed) if ok else ()
        return cls(listed, len(listed), ranges, refused=None if ok else "integers >= 0")

    def counted(self) -> int:
        """How many seeds these are; an InputError for a range that runs backwards (`5-2`
        names no seed) or a value that is no list of seeds."""
        if self.early is not None:
            raise _errors().InputError(self.early)
        return self.count

    def values(self) -> list[int]:
        """The seeds, each once, in order; an InputError naming what is allowed when these
        are not seeds (or more than MAX_SEEDS of them, written as text)."""
        if self.refused is not None:
            raise _errors().bad_value("seeds", self.given, self.refused)
        return list(self._expanded)

    @functools.cached_property
    def _expanded(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(s for lo, hi in self.ranges for s in range(lo, hi + 1)))


def _of_text(text: str) -> AgentSeeds:
    """Seeds from text: `count` and `early` as the sweep's size check reads them (`a-b` with
    digits on both sides is a range, any other part one seed), `ranges` and `refused` as
    the seeds are then read (each part an integer or `low-high`)."""
    count, early = 0, None
    parts = [p.strip() for p in text.split(",")]
    if "" in parts and text.strip():  # `0,,1` or `0,`: a seed left out, never dropped
        early = f"--seeds: got {text!r}, which has an empty item; allowed: {ALLOWED}"
    for part in parts:
        lo, sep, hi = part.partition("-")
        if sep and lo.strip().isdigit() and hi.strip().isdigit():
            low, high = int(lo), int(hi)
            if high < low and early is None:
                early = (
                    f"--seeds: got {text!r}, whose range {part!r} runs backwards (it names no "
                    f"seed); allowed: ranges low-high such as {high}-{low}"
                )
            count += high - low + 1
        elif part:
            count += 1
    ranges, refused = _strict_ranges(text)
    return AgentSeeds(text, count, ranges, early, refused)


def _strict_ranges(text: str) -> tuple[tuple[tuple[int, int], ...], str | None]:
    """The (low, high) ranges of `text`, and what is allowed when they are not seeds."""
    parts = []
    try:
        for part in [p.strip() for p in text.split(",")]:
            lo, dash, hi = part.partition("-")  # "0-" is half a range: refused
            parts.append((int(lo), int(hi) if dash else int(lo)))
    except ValueError:
        parts = []
    if not parts or any(lo < 0 for lo, _ in parts):
        return (), ALLOWED
    if any(hi < lo for lo, hi in parts):
        return (), f"{ALLOWED}; a range from low to high"
    if sum(hi - lo + 1 for lo, hi in parts) > MAX_SEEDS:
        return (), f"at most {MAX_SEEDS:,} seeds"
    return tuple(parts), None


def parse_seeds(given: Any) -> list[int]:
    """Agent seeds from `0,1,2`, `0-4` (inclusive) or a list of integers; a range that
    runs backwards, or more than MAX_SEEDS seeds, is refused (`AgentSeeds.values`)."""
    return AgentSeeds.parse(given).values()


def _errors():
    """testbed.errors, imported when an error is raised (see the module docstring)."""
    from testbed import errors

    return errors
