"""Real data of the user's own: arrays checked for use as a dataset, .npz and .csv files.

`check_arrays` validates four arrays (shapes, dtypes, integer labels 0..C-1, one feature
count, finite values) and returns them as a `RawDataset` with the number of classes.

Files are named in problem ids as `real/file:<path>/<tau>/<seed>[/<num_train>]` (see
generative.real_data.problems). Two formats:

- `.npz` (numpy.savez): arrays `x_train` [n, d], `y_train` [n], `x_test` [m, d],
  `y_test` [m] (inputs of more axes are flattened), optionally a scalar `num_classes`
  (else C = the largest label + 1). Other arrays are ignored. uint8 inputs are image
  pixels (scaled to [0, 1] before standardising, as the TFDS image datasets).
- `.csv`: comma-separated, one example per row, numbers only. With no header row the
  last column is the label and the others are the features. A first row with any
  non-numeric cell is a header: the column named `label` is the label (else the last
  column), a column named `split` (cells `train` / `test`) chooses each row's split, and
  the other columns are the features. With no `split` column the test set is a fixed
  seeded fifth of the rows, as for the offline scikit-learn datasets (the same
  permutation: datasets.offline_split). Labels are integers 0..C-1 (`3` or `3.0`);
  C = the largest label + 1.

Inputs of a file are standardised per feature by default (`standardize="auto"`: tabular
features each have their own scale), except uint8 image pixels, which get the reference's
per-example form; `standardize=example|feature` (an option of `generative.load`, or
`--option` on the command line) chooses.

A file is read once per process (cached by path, size and modification time).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import math
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from generative.real_data.specs import DatasetSpec, RawDataset, offline_split
from testbed.errors import InputError

FILE_PREFIX = "file:"
SUFFIXES = (".npz", ".csv")
NPZ_ARRAYS = ("x_train", "y_train", "x_test", "y_test")
ALLOWED_NPZ = (
    "an .npz with arrays x_train [n, d], y_train [n], x_test [m, d], y_test [m] "
    "(integer labels 0..C-1; optional scalar num_classes)"
)
ALLOWED_CSV = (
    "a comma-separated .csv of numbers, one example per row: the label (an integer 0..C-1) "
    "in the last column, or in a column named 'label' under a header row; an optional "
    "'split' column of train/test"
)
LABEL_COLUMN, SPLIT_COLUMN = "label", "split"
MIN_CSV_ROWS = 5  # the seeded 80/20 split needs n // 5 >= 1 test rows


def is_file_dataset(name: str) -> bool:
    return isinstance(name, str) and name.startswith(FILE_PREFIX)


def data_version(dataset: str) -> str | None:
    """The sha256 of a `file:<path>` dataset's file (None for other datasets, or a file
    that cannot be read): a result is of the file as it was, and a sweep refuses to reuse
    it once the file at that path changed."""
    if not is_file_dataset(dataset):
        return None
    try:
        path = Path(dataset[len(FILE_PREFIX) :]).expanduser().resolve()
        stat = path.stat()
        return _sha256(str(path), stat.st_mtime_ns, stat.st_size)
    except OSError:
        return None


@functools.lru_cache(maxsize=64)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    """A file's sha256, read once per version (path, modification time, size): a sweep's
    jobs on one file do not read it again each."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_suffix(path: str, field: str = "path") -> None:
    if not path.lower().endswith(SUFFIXES):
        raise InputError(
            f"{field}: got {path!r}; allowed: a path ending in .npz or .csv ({ALLOWED_NPZ}; "
            f"or {ALLOWED_CSV})"
        )


# ----- arrays -----


def _inputs(x: Any, field: str, where: str) -> np.ndarray:
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as e:  # ragged lists
        raise InputError(
            f"{where}{field}: got {type(x).__name__} ({e}); allowed: numbers"
        ) from None
    if arr.dtype.kind not in "biuf":
        raise InputError(
            f"{where}{field}: got dtype {arr.dtype}; allowed: numbers (int, uint or float)"
        )
    if arr.ndim < 2:
        raise InputError(
            f"{where}{field}: got shape {arr.shape}; allowed: [n, d] (one row per example)"
        )
    if arr.dtype.kind == "b":
        arr = arr.astype(np.float64)
    if arr.ndim > 2:
        arr = arr.reshape(len(arr), -1)
    if len(arr) == 0:
        raise InputError(f"{where}{field}: got 0 rows; allowed: at least 1 example")
    if arr.shape[1] == 0:
        raise InputError(f"{where}{field}: got shape {arr.shape}; allowed: at least 1 feature")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        row = int(np.argwhere(~np.isfinite(arr))[0][0])
        raise InputError(
            f"{where}{field}: got a NaN or infinite value (row {row}); allowed: finite numbers"
        )
    return arr


def _labels(y: Any, n: int, field: str, where: str) -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise InputError(f"{where}{field}: got shape {arr.shape}; allowed: [n] (one label a row)")
    if arr.dtype.kind not in "iu":
        raise InputError(
            f"{where}{field}: got dtype {arr.dtype}; allowed: integer class labels 0..C-1 "
            "(e.g. y.astype(int))"
        )
    if len(arr) != n:
        x = field.replace("y_", "x_")
        raise InputError(
            f"{where}{field}: got {len(arr)} labels for {n} rows of {x}; allowed: one label a row"
        )
    if arr.min() < 0:
        raise InputError(f"{where}{field}: got label {int(arr.min())}; allowed: integers 0..C-1")
    return arr.astype(np.int32)


def check_arrays(
    x_train: Any,
    y_train: Any,
    x_test: Any,
    y_test: Any,
    num_classes: int | None = None,
    where: str = "",
) -> tuple[RawDataset, int]:
    """(RawDataset, number of classes) of four arrays, or an InputError naming the field.

    Inputs are [n, d] numbers (more axes are flattened; bools become floats), finite, with
    the same d in train and test; labels are integers 0..C-1, one per row. `num_classes`
    None means the largest label + 1 (at least 2). `where` prefixes the messages.
    """
    xs = {k: _inputs(v, k, where) for k, v in (("x_train", x_train), ("x_test", x_test))}
    if xs["x_train"].shape[1] != xs["x_test"].shape[1]:
        raise InputError(
            f"{where}x_test: got {xs['x_test'].shape[1]} features; allowed: "
            f"{xs['x_train'].shape[1]} (the features of x_train)"
        )
    ys = {
        "y_train": _labels(y_train, len(xs["x_train"]), "y_train", where),
        "y_test": _labels(y_test, len(xs["x_test"]), "y_test", where),
    }
    top = max(int(y.max()) for y in ys.values())
    if num_classes is None:
        if top < 1:
            raise InputError(
                f"{where}labels: got only class 0; allowed: at least two classes 0..C-1 "
                "(or give num_classes)"
            )
        num_classes = top + 1
    else:
        if (
            isinstance(num_classes, bool)
            or not isinstance(num_classes, int | np.integer)
            or num_classes < 2
        ):
            raise InputError(f"{where}num_classes: got {num_classes!r}; allowed: an integer >= 2")
        num_classes = int(num_classes)
        for name, y in ys.items():
            if y.max() >= num_classes:
                raise InputError(
                    f"{where}{name}: got label {int(y.max())}; allowed: integers "
                    f"0..{num_classes - 1} (num_classes = {num_classes})"
                )
    raw = RawDataset(xs["x_train"], ys["y_train"], xs["x_test"], ys["y_test"])
    return raw, num_classes


def arrays_spec(name: str, source: str, source_name: str, raw: RawDataset, num_classes: int):
    """The DatasetSpec of checked arrays (sizes as they are). uint8 inputs (train and test)
    are image pixels, scaled to [0, 1] before standardising as for the TFDS images."""
    image = raw.x_train.dtype == np.uint8 and raw.x_test.dtype == np.uint8
    return DatasetSpec(
        name,
        source,  # type: ignore[arg-type]
        source_name,
        "image" if image else "structured",
        num_classes,
        int(raw.x_train.shape[1]),
        len(raw.y_train),
        len(raw.y_test),
    )


# ----- files -----


def _where(path: Path) -> str:
    """`data file <path>: ` (a relative path with the absolute one it was read as)."""
    shown = str(path) if path.is_absolute() else f"{path} (= {Path.cwd() / path})"
    return f"data file {shown}: "


def _error(path: Path, why: str, allowed: str) -> InputError:
    return InputError(f"{_where(path)}{why}; allowed: {allowed}")


def _refuse_first_bad(bad, rows, path: Path, said, allowed: str) -> None:
    """Raises on the first of `rows` (line, cells) flagged in `bad`; `said(cells)` says why."""
    first = np.flatnonzero(bad)
    if len(first):
        line, r = rows[first[0]]
        raise _error(path, f"line {line}, {said(r)}", allowed)


def read_npz(path: Path) -> tuple[RawDataset, int]:
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("a single array (.npy), not an archive of named arrays")
        with loaded as f:
            found = sorted(f.files)
            missing = [k for k in NPZ_ARRAYS if k not in found]
            if missing:
                raise _error(
                    path,
                    f"no array {missing[0]!r} (found: {', '.join(found) or 'none'})",
                    ALLOWED_NPZ,
                )
            arrays = {k: f[k] for k in NPZ_ARRAYS}
            num_classes = f["num_classes"] if "num_classes" in found else None
    except InputError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise _error(path, f"unreadable ({type(e).__name__}: {e})", ALLOWED_NPZ) from None
    if num_classes is not None:
        if num_classes.shape != () or num_classes.dtype.kind not in "iu":
            raise _error(path, f"num_classes is {num_classes!r}", "a scalar integer >= 2")
        num_classes = int(num_classes)
    return check_arrays(**arrays, num_classes=num_classes, where=_where(path))


def read_csv(path: Path) -> tuple[RawDataset, int]:
    where = _where(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # Excel's "CSV UTF-8" BOM
            rows = [(i + 1, r) for i, r in enumerate(csv.reader(f)) if any(c.strip() for c in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise _error(path, f"unreadable ({type(e).__name__}: {e})", ALLOWED_CSV) from None
    if not rows:
        raise _error(path, "empty", ALLOWED_CSV)
    header = None
    if any(not _is_number(c) for c in rows[0][1]):
        header = [c.strip() for c in rows[0][1]]
        rows = rows[1:]
    width = len(header) if header is not None else len(rows[0][1]) if rows else 0
    if width < 2:
        raise _error(path, f"{width} column(s)", ALLOWED_CSV + "; at least 2 columns")
    for line, r in rows:
        if len(r) != width:
            raise _error(path, f"line {line} has {len(r)} cells, not {width}", ALLOWED_CSV)
    names = header or [f"column {j + 1}" for j in range(width)]
    lower = [n.lower() for n in names]  # 'Label' and 'SPLIT' are the same columns
    label = lower.index(LABEL_COLUMN) if LABEL_COLUMN in lower else width - 1
    split = lower.index(SPLIT_COLUMN) if SPLIT_COLUMN in lower else None
    if split == label:
        raise _error(path, "the label column is the split column", ALLOWED_CSV)
    features = [j for j in range(width) if j not in (label, split)]
    if split is None and len(rows) < MIN_CSV_ROWS:
        raise _error(
            path,
            f"{len(rows)} data rows",
            f"at least {MIN_CSV_ROWS} (a fifth of them is the test set), or a 'split' column",
        )
    cells = np.array([r for _, r in rows], dtype=object).reshape(len(rows), width)
    x = _numeric(cells[:, features], rows, [names[j] for j in features], path, ALLOWED_CSV)
    y_float = _numeric(cells[:, [label]], rows, [names[label]], path, ALLOWED_CSV)[:, 0]
    _refuse_first_bad(
        (y_float != np.round(y_float)) | (y_float < 0),
        rows,
        path,
        lambda r: f"column {names[label]!r}: label {r[label].strip()!r}",
        "integer labels 0..C-1",
    )
    y = y_float.astype(np.int64)
    if split is None:
        train, test = offline_split(len(y))
    else:
        kinds = np.array([str(c).strip().lower() for c in cells[:, split]])
        _refuse_first_bad(
            ~np.isin(kinds, ("train", "test")),
            rows,
            path,
            lambda r: f"column 'split': got {r[split].strip()!r}",
            "'train' or 'test' in the split column",
        )
        train, test = np.flatnonzero(kinds == "train"), np.flatnonzero(kinds == "test")
        for name, idx in (("train", train), ("test", test)):
            if not len(idx):
                raise _error(path, f"no row has split '{name}'", "at least one train and test row")
    return check_arrays(x[train], y[train], x[test], y[test], where=where)


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _numeric(cells: np.ndarray, rows, names, path: Path, allowed: str) -> np.ndarray:
    """The cells as float64, or an error naming the first cell that is not a finite number."""
    try:
        out = cells.astype(np.float64)
    except ValueError:
        out = None
    if out is not None and np.isfinite(out).all():
        return out
    for i in range(cells.shape[0]):
        for j in range(cells.shape[1]):
            text = str(cells[i, j]).strip()
            if not (_is_number(text) and math.isfinite(float(text))):
                raise _error(
                    path,
                    f"line {rows[i][0]}, column {names[j]!r}: got {text!r}",
                    allowed.split(":")[0] + " (finite numbers in every cell)",
                )
    return out  # unreachable: some cell failed above


_CACHE: dict[tuple[str, int, int], tuple[RawDataset, int]] = {}
_CACHE_SIZE = 4


def load_file(path: str | os.PathLike) -> tuple[RawDataset, int]:
    """(RawDataset, number of classes) of a .npz or .csv file (see the module doc), or an
    InputError naming the path and what is allowed."""
    text = os.fspath(path)
    check_suffix(text)
    p = Path(text).expanduser()
    try:
        stat = p.stat()
    except OSError as e:
        why = "no such file" if isinstance(e, FileNotFoundError) else f"{e.strerror or e}"
        raise _error(p, why, "an existing .npz or .csv file (see README, 'Real data')") from None
    if not p.is_file():
        raise _error(p, "not a file", "an existing .npz or .csv file")
    key = (str(p.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _CACHE:
        out = read_npz(p) if text.lower().endswith(".npz") else read_csv(p)
        while len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = out
    return _CACHE[key]


def file_spec(name: str) -> tuple[DatasetSpec, RawDataset]:
    """(spec, arrays) of the file dataset `file:<path>` (the file is read and checked)."""
    path = name[len(FILE_PREFIX) :]
    raw, num_classes = load_file(path)
    return arrays_spec(name, "file", path, raw, num_classes), raw
