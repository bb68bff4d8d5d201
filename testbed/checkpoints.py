"""Where agents keep checkpoints of long trainings, so an interrupted sweep resumes them.

`TESTBED_CHECKPOINTS` names the directory (unset, empty or "off": no checkpoints). A sweep
with a results store sets it to `<results>.checkpoints` for its workers unless the user set
it, and removes that directory once every job of the sweep is stored as finished
(`beside_store`). Agents key each file by what decides their training (`checkpoint_path`);
sbi's one-round trainings use it (`agents.sbi_checkpoint`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CHECKPOINTS_ENV = "TESTBED_CHECKPOINTS"
SUFFIX = ".checkpoints"


def checkpoint_dir() -> Path | None:
    """The directory `TESTBED_CHECKPOINTS` names, or None (unset, empty or 'off')."""
    value = os.environ.get(CHECKPOINTS_ENV, "").strip()
    return None if value in ("", "off") else Path(value)


def checkpoint_path(directory: Path, name: str, task: str, *key: Any) -> Path:
    """The file of one training: the agent `name`, its task and a digest of the rest of
    what decides the training (`key`)."""
    digest = hashlib.sha256(repr((name, task, *key)).encode()).hexdigest()[:20]
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in f"{name}-{task}")
    return directory / f"{safe}-{digest}.pt"


@contextlib.contextmanager
def beside_store(store_path: str | Path, finished: Callable[[], bool]) -> Iterator[Path | None]:
    """Within: `TESTBED_CHECKPOINTS` = `<store_path>.checkpoints` (new worker processes
    inherit it), unless the user set the variable (then theirs holds, and is never
    removed). On leaving, that directory is removed when `finished()` says every job is
    stored; otherwise it stays for the run that resumes them."""
    if CHECKPOINTS_ENV in os.environ:
        yield checkpoint_dir()
        return
    directory = Path(f"{store_path}{SUFFIX}")
    os.environ[CHECKPOINTS_ENV] = str(directory)
    try:
        yield directory
    finally:
        del os.environ[CHECKPOINTS_ENV]
        if directory.is_dir() and _true(finished):
            shutil.rmtree(directory, ignore_errors=True)


def _true(finished: Callable[[], bool]) -> bool:
    """`finished()`, False when it cannot say (the checkpoints stay)."""
    try:
        return bool(finished())
    except Exception:
        return False
