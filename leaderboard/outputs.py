"""Writing outputs (reports, exports, shipped runs, tables) without ever destroying an input.

An output path that is the results store, any existing SQLite file, or one of their
`-wal` / `-shm` / `-journal` side files is refused before anything is read or written,
whether named directly or through a symbolic link or a hard link; so is a path inside
one of the store's names (an output folder `<store>-wal` or `<store>.checkpoints`), a
file the run reads (`inputs`), a read-only file, a folder, and a path whose folder is
missing or cannot be written. A command checks its outputs before it runs any job.
Outputs are written to a temporary file in the target's folder and renamed into place, so
a crash while writing leaves the older file, never half of a new one.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from testbed.checkpoints import SUFFIX as CHECKPOINTS
from testbed.errors import EnvironmentFault, InputError

SQLITE_HEADER = b"SQLite format 3\x00"
SIDE_FILES = ("-wal", "-shm", "-journal")
# Failures of the machine, not of the path given: a full disk or quota, an I/O error.
ENVIRONMENT_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EIO", "EFBIG") if hasattr(errno, name)
)


def environment_fault(field: str, out: str | os.PathLike, e: OSError) -> EnvironmentFault:
    """The one-line EnvironmentFault of a write that the machine refused (disk full, ...)."""
    return EnvironmentFault(
        f"{field}: cannot write {shown(out)}: {e.strerror or e} (the machine's fault, not the "
        "path's: free some space or fix the disk, then run the command again; the old file, "
        "if any, is unchanged)"
    )


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


def store_names(store: Path) -> list[Path]:
    """The paths a results store (resolved) owns: itself, its side files (SQLite keeps
    them beside the file a link points to) and the folder of its sweeps' checkpoints."""
    return [store.with_name(store.name + s) for s in ("", *SIDE_FILES, CHECKPOINTS)]


def _refusal(path: Path, stores: list[Path]) -> str | None:
    """Why writing `path` (as given, or resolved) could destroy results, or None: it is,
    or lies in, one of the stores' names (a folder output named `<store>-wal` too; a
    name that is a file now holds no output: its own message says so)."""
    named = [path, *(p for p in path.parents if not p.is_file())]
    for store in stores:
        owned = store_names(store)
        if any(_same_file(p, c) for p in named for c in owned):
            return f"it is the results store {str(store)!r} or one of its files"
    if path.is_file() and is_sqlite_file(path):
        return "it is a SQLite file (a results store?)"
    database = database_of(path)
    if database is not None:
        return f"it belongs to the SQLite file {str(database)!r}"
    return None


def _exists(path: Path) -> bool:
    """Whether `path` exists; False for a path the system cannot even look up."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (OSError, ValueError):
        return default


def shown(path: str | os.PathLike, width: int = 80) -> str:
    """A path as a message shows it: whole, or its start and end around '...'."""
    text = os.fspath(path)
    if len(text) <= width:
        return repr(text)
    return repr(f"{text[: width // 2]}...{text[-width // 4 :]}") + f" ({len(text)} characters)"


def check_path_name(field: str, path: str | os.PathLike) -> None:
    """An InputError when `path` has a name longer than its file system allows (usually
    255 bytes) or is longer than a path may be (usually 4096 bytes): the system would
    refuse it with 'File name too long' at the first look."""
    text = os.fspath(path)
    absolute = Path(os.path.abspath(text)) if text.strip() else Path.cwd()
    known = next((p for p in absolute.parents if _exists(p)), Path("/"))
    name_max = _limit(known, "PC_NAME_MAX", 255)
    path_max = _limit(known, "PC_PATH_MAX", 4096)
    for part in Path(text).parts:
        size = len(os.fsencode(part))
        if size > name_max:
            raise InputError(
                f"{field}: got {shown(text)}, in which the name {part[:24]!r}... is {size} "
                f"bytes long; allowed: names of at most {name_max} bytes (the file system's "
                "limit)"
            )
    size = len(os.fsencode(str(absolute)))
    if size >= path_max:
        raise InputError(
            f"{field}: got {shown(text)}, a path of {size} bytes; allowed: paths shorter "
            f"than {path_max} bytes (the system's limit)"
        )


def check_output_path(
    field: str,
    out: str | os.PathLike,
    stores: Iterable[str | os.PathLike] = (),
    inputs: Iterable[str | os.PathLike] = (),
    *,
    make_folder: bool = False,
    suffixes: tuple[str, ...] = (),
) -> Path:
    """`out` as a Path, or an InputError when it cannot or must not be written.

    Refused: one of `stores` (the results files in use), a side file of one or its
    checkpoints folder (`store_names`), or a path inside one of those; any
    existing SQLite file or a side file of one (through links too); one of `inputs` (the
    other files the run reads; the same file through a link or a hard link too); a
    read-only file; a folder; a path whose folder is a file, is missing (with
    `make_folder`, only the folder itself may be missing: it is made when written) or
    cannot be written; a name longer than the file system allows; with `suffixes`, a name
    that ends in none of them (so a typed name cannot overwrite a file of another kind).
    """
    if not str(out).strip():
        example = "report" + (suffixes[0] if suffixes else ".html")  # a name it takes
        raise InputError(f"{field}: got {str(out)!r}; allowed: a file path such as {example}")
    path, resolved = _not_results(field, out, stores, "a new file or an earlier output "
                                  "(e.g. report.html, results.csv)")  # fmt: skip
    if resolved.is_dir():
        raise InputError(
            f"{field}: got {str(out)!r}, which is a folder; allowed: a file path such as "
            f"{str(path / ('report' + (suffixes[0] if suffixes else '.html')))!r}"
        )
    if suffixes and not str(out).endswith(suffixes):
        raise InputError(
            f"{field}: got {str(out)!r}; allowed: a file name ending in " + " or ".join(suffixes)
        )
    folder = next((p for p in resolved.parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise InputError(
            f"{field}: got {str(out)!r}, whose folder {str(folder)!r} is a file; allowed: a "
            "path in a folder"
        )
    for given in inputs:
        if _same_file(resolved, Path(given)):
            raise InputError(
                f"{field}: got {str(out)!r}, which is {str(given)!r}, a file this run reads; "
                "allowed: a path of its own"
            )
    if resolved.exists() and not _writable(resolved):
        raise InputError(
            f"{field}: got {str(out)!r}, which is read-only; allowed: a writable file (or a "
            "new one)"
        )
    _check_folder(field, out, resolved.parent, make_folder)
    return path


def _not_results(
    field: str, out: str | os.PathLike, stores: Iterable[str | os.PathLike], allowed: str
) -> tuple[Path, Path]:
    """`out` as given and resolved, or an InputError when it cannot be resolved or writing
    it (or into it: a folder) could destroy results (`_refusal`, by resolved path, so a
    symbolic link or a `./` spelling does not get around it); `allowed` says what may be."""
    check_path_name(field, out)
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
            f"{field}: got {str(out)!r}, which would overwrite results: {refusal}; "
            f"allowed: {allowed}"
        )
    return path, resolved


def check_output_folder(
    field: str,
    out: str | os.PathLike,
    names: Iterable[str],
    stores: Iterable[str | os.PathLike] = (),
    inputs: Iterable[str | os.PathLike] = (),
) -> Path:
    """`out`, a folder the outputs `names` are written into (made if new, in a folder that
    exists), as a Path; or an InputError before any work: the folder itself must not be
    one of `stores` or their side files (`<store>-wal` made a folder stops the store's
    next write), nor a file, nor empty; each output is then checked as `check_output_path`
    does."""
    stores = list(stores)
    if not str(out).strip():  # '' would be the current folder
        raise InputError(f"{field}: got {str(out)!r}, which is empty; allowed: a folder (made "
                         "if new)")  # fmt: skip
    path, resolved = _not_results(field, out, stores, "a folder of its own (made if new)")
    if resolved.exists() and not resolved.is_dir():
        raise InputError(f"{field}: got {str(out)!r}, a file; allowed: a folder (made if new)")
    for name in names:
        check_output_path(field, path / name, stores, inputs, make_folder=True)
    return path


def _check_folder(field: str, out: str | os.PathLike, folder: Path, make_folder: bool) -> None:
    """An InputError when the output's `folder` is missing (with `make_folder`: when the
    folder it would be made in is) or cannot be written."""
    if not folder.exists():
        if not (make_folder and folder.parent.is_dir()):
            raise InputError(
                f"{field}: got {str(out)!r}, whose folder {str(folder)!r} does not exist; "
                "allowed: a path in an existing folder (make it first)"
            )
        folder = folder.parent  # where the folder is made
    if not _writable(folder):
        raise InputError(
            f"{field}: got {str(out)!r}, whose folder {str(folder)!r} cannot be written; "
            "allowed: a path in a writable folder"
        )


def write_atomically(
    field: str,
    out: str | os.PathLike,
    write: Callable[[Path], None],
    *,
    make_folder: bool = True,
    keep_suffix: bool = False,
) -> Path:
    """Calls `write(tmp)` on a temporary file beside `out`, then renames it onto `out`.

    A crash or an error in `write` leaves `out` as it was. The new file gets the mode
    of the file it replaces (or the default mode for new files under the umask). With
    `keep_suffix`, the temporary file ends as `out` ends (`.tmp.csv.gz`), for a writer that
    goes by the suffix. `make_folder`: the folder of `out` is made if missing
    (one level: its own folder must exist; `check_output_path`, which commands call
    before any work, refuses a missing folder unless told it is made).
    """
    path = Path(out)
    target = path.resolve() if path.is_symlink() else path  # replace the link's target
    try:
        if make_folder:
            target.parent.mkdir(exist_ok=True)
        prefix = f".{target.name[:100]}."  # a long name leaves room for the suffixes
        ending = "".join(target.suffixes)[-20:] if keep_suffix and len(target.name) < 200 else ""
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=".tmp" + ending)
    except OSError as e:
        if e.errno in ENVIRONMENT_ERRNOS:
            raise environment_fault(field, out, e) from None
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
        if e.errno in ENVIRONMENT_ERRNOS:
            raise environment_fault(field, out, e) from None
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
