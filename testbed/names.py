"""Close names for "did you mean" hints. Standard library only: the command line's index
(`experiments.catalog`) loads this file by its path to word its errors as the registries do
without importing the testbed package (JAX)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_names(name: object, names: Iterable[str], n: int = 2) -> list[str]:
    """The (at most `n`) names closest to `name`: a name that differs only in case first,
    then difflib's close matches (typos, a letter missing or swapped)."""
    if not isinstance(name, str) or not name:
        return []
    names = list(names)
    same = [c for c in names if c.lower() == name.lower() and c != name]
    close = difflib.get_close_matches(name.lower(), [c.lower() for c in names], n=n, cutoff=0.6)
    by_lower = {c.lower(): c for c in names}
    return list(dict.fromkeys([*same, *(by_lower[c] for c in close)]))[:n]
