"""Errors for bad input: each names the field, the bad value and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable

from testbed.names import one_of


class InputError(ValueError):
    """Bad input from a user, a config or an agent's output.

    The command line prints the message as one line and exits with status 2.
    """


MAX_LISTED = 60  # every registry (agents, sweeps, families, metrics) fits in full


def bad_value(field: str, value: object, allowed: str | Iterable[object]) -> InputError:
    """Builds an `InputError` saying `field` got `value` and listing what is allowed.

    Lists of up to MAX_LISTED names are given in full (the user sees every allowed
    name); longer ones (e.g. hundreds of problem ids) are cut with a count of the rest.
    """
    if not isinstance(allowed, str):
        allowed = one_of(allowed, MAX_LISTED)
    return InputError(f"{field}: got {value!r}; allowed: {allowed}")


class EnvironmentFault(RuntimeError):
    """The machine or a service failed, not the input: a full disk, an I/O error, a cluster
    that cannot be reached. The message names what failed; the command line prints it in
    one line and exits with status 3 (`experiments.console.EXIT_ENVIRONMENT`)."""
