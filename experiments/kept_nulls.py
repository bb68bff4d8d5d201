"""The nulls the local diagnostics share (`testbed.metrics.LocalData.cache`), kept beside a
results store so that a later process reuses them.

The oracle C2ST's permutation null is computed once per estimator and reused by every later
run (as the paper's); on a 10-d task it costs about 40 minutes. Kept in memory only, a run
stopped after it, or more runs added by a later command, paid it again. `KeptNulls` is the
cache a reproduction hands its diagnostics: every entry is kept in memory, and an entry
whose pickle is at most `max_bytes` (the oracle's null statistics, local-HPD's 1,100 null
regressions: 45 MB for a 100-d x; not L-C2ST-NF's classifiers of it, 520 MB) is also written
to `<results>.nulls/`, keyed by a digest of its key and what else decides it (the run's
sizes, the package versions). A file that cannot be read is set aside and the null is
computed again; an entry that cannot be pickled or written is said and stays in memory,
and the run goes on. The files are
pickles: load only those your own runs wrote.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import tempfile
from collections.abc import Hashable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

log = logging.getLogger("testbed.progress")
_NONE = object()  # no entry (None may be one)

SUFFIX = ".nulls"
MAX_BYTES = 64 * 2**20  # larger entries stay in memory (L-C2ST-NF's classifiers of a 100-d x)


class KeptNulls(MutableMapping):
    """A dict whose small entries are also kept in `directory` (None: memory only), under
    a digest of (key, *salt): a later process with the same salt reads them back."""

    def __init__(
        self, directory: Path | None, salt: tuple[Hashable, ...] = (), max_bytes: int = MAX_BYTES
    ):
        self.directory = None if directory is None else Path(directory)
        self.salt, self.max_bytes = tuple(salt), int(max_bytes)
        self._memory: dict[str, Any] = {}

    def path(self, key: str) -> Path | None:
        """The file that keeps `key`'s entry (None: memory only)."""
        if self.directory is None:
            return None
        digest = hashlib.sha256(repr((key, *self.salt)).encode()).hexdigest()[:24]
        return self.directory / f"{digest}.pkl"

    def __getitem__(self, key: str) -> Any:
        if key in self._memory:
            return self._memory[key]
        path = self.path(key)
        if path is None or not path.exists():
            raise KeyError(key)
        try:
            with open(path, "rb") as f:
                value = pickle.load(f)
        except Exception as exc:  # truncated, foreign, or of code that no longer loads
            log.info("kept null %s cannot be read (%s); computing it again", path, exc)
            with contextlib.suppress(OSError):
                os.replace(path, path.with_name(path.name + ".unused"))
            raise KeyError(key) from None
        self._memory[key] = value
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        if self._memory.get(key, _NONE) is value:  # set again after each use: nothing new
            return
        self._memory[key] = value
        path = self.path(key)
        if path is None or path.exists():  # kept already (the same null, read back)
            return
        try:
            blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # a diagnostic of yours may cache what cannot be pickled
            log.info("kept null %s not written (%s); it stays in memory", path, exc)
            return
        if len(blob) > self.max_bytes:
            return
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            log.info("kept null %s not written (%s); the run goes on", path, exc)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def __delitem__(self, key: str) -> None:
        del self._memory[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._memory)

    def __len__(self) -> int:
        return len(self._memory)
