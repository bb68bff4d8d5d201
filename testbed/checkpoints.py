"""Where agents keep checkpoints of long trainings, so an interrupted sweep resumes them.

`TESTBED_CHECKPOINTS` names the directory (unset, empty or "off": no checkpoints; read by
`testbed.settings`). A sweep with a results store sets it to `<results>.checkpoints` in
the settings its workers get unless the user set it, and removes that directory once every
job of the sweep is stored as ok (`beside_store`). Agents key each file by what decides
their training (`checkpoint_path`); sbi's one-round trainings use it
(`agents.sbi_checkpoint`), and so do long batches of our MLP classifiers
(`testbed.metrics.mlp_checkpoint`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from testbed import settings

CHECKPOINTS_ENV = settings.CHECKPOINTS
SUFFIX = ".checkpoints"
KEPT = "KEPT"  # a folder holding this file is a command's inputs: no sweep removes it
STALE_SECONDS = 600  # a temporary file this old is a write a kill cut short


def checkpoint_dir() -> Path | None:
    """The directory `TESTBED_CHECKPOINTS` names, or None (unset, empty or 'off', in any
    case)."""
    return settings.current().checkpoints


def checkpoint_path(directory: Path, name: str, task: str, *key: Any) -> Path:
    """The file of one training: the agent `name`, its task and a digest of the rest of
    what decides the training (`key`)."""
    digest = hashlib.sha256(repr((name, task, *key)).encode()).hexdigest()[:20]
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in f"{name}-{task}")
    return directory / f"{safe}-{digest}.pt"


@contextlib.contextmanager
def beside_store(
    store_path: str | Path,
    finished: Callable[[], bool] | None = None,
    enabled: bool = True,
) -> Iterator[Path | None]:
    """Within: `TESTBED_CHECKPOINTS` = `<store_path>.checkpoints` (absolute) in the settings
    in force (`testbed.settings.current()`, which the workers started inside get), unless
    the user set the variable (then theirs holds, and is never removed), or 'off' when not
    `enabled` (e.g. a sweep that trains once per job: one job must not take another's
    training). On leaving, that directory is removed when `finished()` says every job is
    stored as ok; otherwise it stays for the run that resumes them. Without `finished` it
    always stays, marked KEPT: the trainings are the caller's inputs (a reproduction's
    estimators), and a later sweep on the same store never removes them."""
    outer = settings.current()
    if enabled and outer.get(CHECKPOINTS_ENV) is not None:
        yield outer.checkpoints
        return
    directory = Path(f"{store_path}{SUFFIX}").resolve() if enabled else None
    if directory is not None and finished is None:
        _mark_kept(directory)
    chosen = outer.replace(**{CHECKPOINTS_ENV: str(directory) if directory else "off"})
    try:
        with settings.using(chosen):
            yield directory
    finally:
        if directory is not None and directory.is_dir() and finished and _true(finished):
            _remove_checkpoints(directory)


def _mark_kept(directory: Path) -> None:
    """Marks `directory` as kept (made if missing; a folder that cannot be made or marked is
    left as it is: its command says so when it writes there)."""
    with contextlib.suppress(OSError):
        directory.mkdir(exist_ok=True)
        marker = directory / KEPT
        if not marker.exists():
            marker.write_text(
                "Trainings a reproduction keeps as its inputs: no sweep removes this folder. "
                "Delete it by hand to train them again.\n"
            )


def _remove_checkpoints(directory: Path) -> None:
    """Our files in `directory` (checkpoints, set-aside ones, unfinished writes), then the
    directory if that left it empty: anything else someone put there stays, and a folder
    marked KEPT (a reproduction's inputs) stays whole."""
    if (directory / KEPT).exists():
        return
    for pattern in ("*.pt", "*.pt.unused", "*.pt*.tmp", "mlps-*.npz*"):
        for path in directory.glob(pattern):
            with contextlib.suppress(OSError):
                path.unlink()
    with contextlib.suppress(OSError):
        directory.rmdir()


def _true(finished: Callable[[], bool]) -> bool:
    """`finished()`, False when it cannot say (the checkpoints stay)."""
    try:
        return bool(finished())
    except Exception:
        return False


def write_atomically(path: Path, write: Callable[[IO[bytes]], None]) -> str | None:
    """`write`s `path` through a temporary file beside it, then renames it over (a crash
    mid-write leaves the previous file); None, or why it could not be written."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
        tmp = None
        _remove_stale(path)
        return None
    except Exception as exc:
        return str(exc)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _remove_stale(path: Path) -> None:
    """Temporary files of `path` older than STALE_SECONDS: writes that a kill cut short
    (a write in progress elsewhere is younger)."""
    import time

    for old in path.parent.glob(f"{path.name}*.tmp"):
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > STALE_SECONDS:
                old.unlink()


def set_aside(path: Path) -> None:
    """Moves a checkpoint that does not fit to `<name>.unused` (kept for a look, never read)."""
    with contextlib.suppress(OSError):
        os.replace(path, path.with_name(path.name + ".unused"))
