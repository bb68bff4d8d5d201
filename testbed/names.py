"""Close names for "did you mean" hints, and the words of an unknown name's error. Standard
library only: the command line's index (`experiments.catalog`) loads this file by its path
to word its errors as the registries do (with these same functions) without importing the
testbed package (JAX)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping


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


def did_you_mean(name: object, names: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when a name among `names` is close to `name` (a typo, another
    case), else ''."""
    close = close_names(name, names)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def one_of(allowed: Iterable[object], max_listed: int) -> str:
    """'one of: a, b, c': the first `max_listed` of `allowed`, the others counted."""
    items = [str(a) for a in allowed]
    if len(items) > max_listed:
        items = items[:max_listed] + [f"... ({len(items) - max_listed} more)"]
    return "one of: " + ", ".join(items)


def unknown_name(field: str, name: object, names: Iterable[str], max_listed: int) -> str:
    """The error of a name that is not among `names`: '<field>: got 'x' (did you mean
    'y'?); allowed: one of: ...' (`testbed.registry.unknown_name`'s words)."""
    names = list(names)
    return f"{field}: got {name!r}{did_you_mean(name, names)}; allowed: {one_of(names, max_listed)}"


def unknown_setting(where: str, name: str, settings: Iterable[str]) -> str:
    """The error of a setting a config does not have: '<where>: unknown setting 'x' (did
    you mean 'y'?); allowed: a, b' (`testbed.config.coerce_fields`'s words)."""
    settings = sorted(settings)
    return f"{where}unknown setting {name!r}{did_you_mean(name, settings)}; allowed: " + ", ".join(
        settings
    )


def unused_override(fields: Mapping[str, Iterable[str]], keys: Iterable[str]) -> str | None:
    """The error of a sweep's `--set` key that no agent has (`fields`: each agent's config
    fields; a key applies to the agents that have it, so one none has is a typo), or None."""
    fields = {n: set(f) for n, f in fields.items()}
    known = set().union(*fields.values())
    unused = sorted(set(keys) - known)
    if not unused:
        return None
    hint = did_you_mean(unused[0], known - {"seed"})
    return (
        f"set {unused[0]}: no agent among {', '.join(fields)} has this field{hint}; allowed: "
        + "; ".join(
            f"{n}: {', '.join(sorted(f - {'seed'})) or '(none)'}" for n, f in fields.items()
        )
    )


def malformed_problem_id(problem_id: object, families: Iterable[str]) -> str:
    """The error of a problem id that is not 'family/...' (`generative.split_id`'s words)."""
    return (
        f"problem id: got {problem_id!r}; allowed: 'family/...' with family one of: "
        + ", ".join(families)
    )
