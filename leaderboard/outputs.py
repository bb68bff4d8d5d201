"""Writing outputs (reports, exports) without ever destroying a results store.

An output path that is the results store, any existing SQLite file, or one of their
`-wal` / `-shm` / `-journal` side files is refused before anything is read or written.
Outputs are written to a temporary file in the target's folder and renamed into place,
so a crash while writing leaves the older file, never half of a new one.
"""

from __future__ import annotations

import os
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


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)  # hard links too
    except OSError:
        return False


def _database_of(path: Path) -> Path | None:
    """The database a side file (`X-wal`, `X-shm`, `X-journal`) belongs to, else None."""
    for suffix in SIDE_FILES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.with_name(path.name[: -len(suffix)])
    return None


def check_output_path(
    field: str, out: str | os.PathLike, stores: Iterable[str | os.PathLike] = ()
) -> Path:
    """`out` as a Path, or an InputError when writing it could destroy results.

    Refused: one of `stores` (the results files in use) or a side file of one; any
    existing SQLite file or a side file of one; a folder.
    """
    path = Path(out)
    refusal = None
    for store in map(Path, stores):
        candidates = [store] + [store.with_name(store.name + s) for s in SIDE_FILES]
        if any(_same_file(path, c) for c in candidates):
            refusal = f"it is the results store {str(store)!r} or one of its files"
    database = _database_of(path)
    if refusal is None and path.is_file() and is_sqlite_file(path):
        refusal = "it is a SQLite file (a results store?)"
    elif refusal is None and database is not None and is_sqlite_file(database):
        refusal = f"it belongs to the SQLite file {str(database)!r}"
    elif refusal is None and path.is_dir():
        refusal = "it is a folder"
    if refusal:
        raise InputError(
            f"{field}: got {str(out)!r}, which would overwrite results: {refusal}; allowed: a "
            "new file or an earlier output (e.g. report.html, results.csv)"
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
        raise InputError(f"{field}: got {str(out)!r}; cannot write it ({e.strerror})") from None
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
