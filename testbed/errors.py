"""Errors for bad input: each names the field, the bad value and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable


class InputError(ValueError):
    """Bad input from a user, a config or an agent's output.

    The command line prints the message as one line and exits with status 2.
    """


def bad_value(field: str, value: object, allowed: str | Iterable[object]) -> InputError:
    """Builds an `InputError` saying `field` got `value` and listing what is allowed."""
    if not isinstance(allowed, str):
        items = [str(a) for a in allowed]
        if len(items) > 12:
            items = items[:12] + [f"... ({len(items) - 12} more)"]
        allowed = "one of: " + ", ".join(items)
    return InputError(f"{field}: got {value!r}; allowed: {allowed}")
