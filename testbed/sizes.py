"""Upper bounds of estimator sizes, from the bytes an estimator would hold at once.

A size option (`num_test_seeds`, `num_enn_samples`, `num_samples`, ...) has no fixed upper
bound of its own: memory bounds it. A problem family states the bytes its estimator holds
at once as a function of its sizes; sizes that need more than MEMORY_SHARE of the machine's
physical memory are refused before anything is allocated, in one line that names the size,
the largest value that fits and the bytes, instead of an out-of-memory traceback (or the
kernel's out-of-memory killer) minutes later. `TESTBED_MEMORY_GB` sets the memory the
bound is taken from (a cluster node's, or a test's).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

from testbed import settings
from testbed.errors import InputError

MEMORY_SHARE = 0.5  # of the machine's memory that one estimator may hold at once
MEMORY_ENV = settings.MEMORY_GB
GB = 2**30


def memory_bytes() -> int:
    """The memory the bound is taken from: `TESTBED_MEMORY_GB`, else the machine's."""
    gb = settings.current().memory_gb
    if gb is not None:
        return int(gb * GB)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # no sysconf: a common laptop's
        return 16 * GB


def _largest(needed: Callable[..., int], sizes: dict[str, int], name: str, limit: int) -> int:
    """The largest value of size `name` (the others as given) whose bytes fit in `limit`
    (0: none does)."""
    low, high = 0, sizes[name]
    while low < high:
        mid = (low + high + 1) // 2
        if mid and needed(**{**sizes, name: mid}) <= limit:
            low = mid
        else:
            high = mid - 1
    return low


def check_memory(
    needed: Callable[..., int],
    sizes: Mapping[str, int],
    what: str,
    defaults: Any = None,
) -> None:
    """An InputError when `needed(**sizes)`, the bytes `what` holds at once, is more than
    MEMORY_SHARE of the memory. It names a size that alone can bring the bytes down
    enough: the one furthest above its default (`defaults`: a dataclass instance or a
    mapping), else the one furthest over what fits."""
    sizes = {k: int(v) for k, v in sizes.items()}
    nbytes = needed(**sizes)
    memory = memory_bytes()
    limit = int(memory * MEMORY_SHARE)
    if nbytes <= limit:
        return
    best = {name: _largest(needed, sizes, name, limit) for name in sizes}
    if dataclasses.is_dataclass(defaults):
        defaults = {f.name: f.default for f in dataclasses.fields(defaults)}
    usual = {n: (defaults or {}).get(n) for n in sizes}
    usual = {n: v if isinstance(v, int) and v > 0 else max(best[n], 1) for n, v in usual.items()}
    name = max(sizes, key=lambda n: (best[n] > 0, sizes[n] / usual[n]))
    others = ", ".join(f"{n}={v:,}" for n, v in sizes.items() if n != name)
    fits = (f"at most {best[name]:,}" if best[name] else "no value") + (
        f" with {others}" if others else ""
    )
    raise InputError(
        f"{name}: got {sizes[name]:,}; allowed: {fits} ({what} would hold "
        f"{nbytes / GB:,.1f} GB at once; the bound is {MEMORY_SHARE:.0%} of "
        f"{memory / GB:,.1f} GB of memory, {MEMORY_ENV} to set it)"
    )
