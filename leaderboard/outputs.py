"""Writing outputs (reports, exports) without ever destroying a results store.

An output path that is the results store, any existing SQLite file, or one of their
`-wal` / `-shm` / `-journal` side files is refused before anything is read or written,
whether named directly or through a symbolic link; so is a read-only file. Outputs are
written to a temporary file in the target's folder and renamed into place, so a crash
while writing leaves the older file, never half of a new one.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from testbed.errors import InputError

SQLITE_HEADER = b"SQLite format 3\x00"
SIDE_FILES = ("-wal", "-shm", "-journal")


def is_sqlite_file(path: str | os.PathLike) -> bool:
    """True when `path` is a file that starts with SQLite's header."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_HEADER
    except OSError:
        return False


def database_of(path: Path) -> Path | None:
    """The SQLite database a side file (`X-wal`, `X-shm`, `X-journal`) belongs to, if any."""
    for suffix in SIDE_FILES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            base = path.with_name(path.name[: -len(suffix)])
            if is_sqlite_file(base):
                return base
    return None


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)  # hard links too
    except OSError:
        return False


def _writable(path: Path) -> bool:
    """Mode bits count even for root (who could write anyway)."""
    mode = path.stat().st_mode
    return bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)) and os.access(path, os.W_OK)


def _refusal(path: Path, stores: list[Path]) -> str | None:
    """Why writing `path` (already resolved) could destroy results, or None."""
    for store in stores:
        candidates = [store] + [store.with_name(store.name + s) for s in SIDE_FILES]
        if any(_same_file(path, c) for c in candidates):
            return f"it is the results store {str(store)!r} or one of its files"
    if path.is_file() and is_sqlite_file(path):
        return "it is a SQLite file (a results store?)"
    database = database_of(path)
    if database is not None:
        return f"it belongs to the SQLite file {str(database)!r}"
    return None


def check_output_path(
    field: str, out: str | os.PathLike, stores: Iterable[str | os.PathLike] = ()
) -> Path:
    """`out` as a Path, or an InputError when it cannot or must not be written.

    Refused: one of `stores` (the results files in use) or a side file of one; any
    existing SQLite file or a side file of one (through links too); a read-only file; a
    folder; a path whose folder is a file.
    """
    if not str(out).strip():
        raise InputError(f"{field}: got {str(out)!r}; allowed: a file path such as report.html")
    path = Path(out)
    try:
        resolved = path.resolve(strict=False)
    except (OSError, RuntimeError) as e:  # e.g. a symbolic link loop
        reason = getattr(e, "strerror", None) or str(e)
        raise InputError(
            f"{field}: got {str(out)!r}, which cannot be resolved ({reason})"
        ) from None
    stores = [Path(s).resolve() for s in stores]
    refusal = _refusal(path, stores) or _refusal(resolved, stores)
    if refusal:
        raise InputError(
            f"{field}: got {str(out)!r}, which would overwrite results: {refusal}; allowed: a "
            "new file or an earlier output (e.g. report.html, results.csv)"
        )
    if resolved.is_dir():
        raise InputError(
            f"{field}: got {str(out)!r}, which is a folder; allowed: a file path such as "
            f"{str(path / 'report.html')!r}"
        )
    folder = next((p for p in resolved.parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise InputError(
            f"{field}: got {str(out)!r}, whose folder {str(folder)!r} is a file; allowed: a "
            "path in a folder"
        )
    if resolved.exists() and not _writable(resolved):
        raise InputError(
            f"{field}: got {str(out)!r}, which is read-only; allowed: a writable file (or a "
            "new one)"
        )
    return path


def write_atomically(field: str, out: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Calls `write(tmp)` on a temporary file beside `out`, then renames it onto `out`.

    A crash or an error in `write` leaves `out` as it was. The new file gets the mode
    of the file it replaces (or the default mode for new files under the umask).
    """
    path = Path(out)
    target = path.resolve() if path.is_symlink() else path  # replace the link's target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as e:
        raise InputError(
            f"{field}: got {str(out)!r}; cannot write a temporary file in its folder "
            f"{str(target.parent)!r} ({e.strerror}); allowed: a path in a writable folder (the "
            "output is written beside its target, then renamed into place)"
        ) from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except OSError as e:
        raise InputError(f"{field}: got {str(out)!r}; cannot write it ({e.strerror})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _mode_for(target: Path) -> int:
    if target.exists():
        return target.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
