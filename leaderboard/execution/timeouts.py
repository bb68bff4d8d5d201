"""Per-job time limits, as every executor takes them, and the size of a job source."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from testbed.errors import InputError

DEFAULT_TIMEOUT = 24 * 3600.0  # per job; the SBI benchmark's slowest runs took over 6 hours
NO_LIMIT_ABOVE = 1e9  # seconds (~30 years): a longer limit is no limit


def check_timeout(value: Any) -> float | None:
    """A per-job time limit in seconds, or None for no limit (`0`, `inf`, `none`)."""
    if value is None or str(value).strip().lower() == "none":
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if seconds == 0:  # 0, 0.0, -0, 0e0: no limit
        return None
    if not seconds > 0:  # negative, NaN or not a number
        raise InputError(
            f"timeout: got {value!r}; allowed: seconds > 0 (default {DEFAULT_TIMEOUT:g}), or "
            "0, inf or none for no limit"
        )
    return None if seconds >= NO_LIMIT_ABOVE else seconds


def known_count(jobs: Iterable[Any]) -> int | None:
    """How many jobs `jobs` holds, when it says (executors size their pools by it)."""
    try:
        return len(jobs)  # type: ignore[arg-type]
    except TypeError:
        return None
