"""Reading the reference's TFDS datasets without TensorFlow (array_record data sources).

TFDS reads a *prepared* dataset in the array_record format with `as_data_source`, which
needs no TensorFlow; preparing one (downloading and converting) does. A prepared dataset
is read once and its flattened arrays are cached as `<data_dir>/testbed_cache/<name>.npz`,
so later problems load in a fraction of a second. Anything missing or broken raises an
InputError that says how to fix it.

The testbed never downloads by default: a dataset that is not prepared is an error that
says where it looked and the command that prepares it. `TESTBED_TFDS_DOWNLOAD=1` (problems
built from ids) or `download=True` lets TFDS prepare a missing dataset instead (TensorFlow
and network needed). `prepared_state` tells, from the files alone (no TFDS import), whether
a dataset is at hand: what a sweep checks before its first job.
"""

from __future__ import annotations

import contextlib
import os
import sys
import zipfile
from pathlib import Path

import numpy as np

from generative.real_data.specs import DatasetSpec, RawDataset
from testbed import settings
from testbed.errors import InputError

CACHE_FOLDER = "testbed_cache"
DOWNLOAD_ENV = settings.TFDS_DOWNLOAD
DEFAULT_DATA_DIR = "~/tensorflow_datasets"
# What preparing needs besides TFDS: the `tf` extra (TensorFlow, and importlib_resources,
# which TFDS 4.9 imports when it prepares a dataset but does not declare for Python 3.11).
PREPARE_PACKAGES = "pip install -c constraints.txt -e '.[tf]'"


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """`data_dir`, else $TFDS_DATA_DIR, else ~/tensorflow_datasets (TFDS's own default)."""
    if data_dir is None:
        data_dir = settings.current().tfds_data_dir or DEFAULT_DATA_DIR
    return Path(data_dir).expanduser()


def where_looked(data_dir: str | os.PathLike | None) -> str:
    """The folder read and why that one: `<dir> (data_dir)`, `(TFDS_DATA_DIR)` or the default."""
    root = resolve_data_dir(data_dir)
    if data_dir is not None:
        return f"{root} (the data_dir given)"
    if settings.current().tfds_data_dir:
        return f"{root} ($TFDS_DATA_DIR)"
    return f"{root} (the default {DEFAULT_DATA_DIR}; TFDS_DATA_DIR is not set)"


def download_enabled() -> bool:
    """Whether TESTBED_TFDS_DOWNLOAD lets TFDS prepare missing datasets (default: no)."""
    return settings.current().tfds_download


def build_command(names: list[str], data_dir: Path) -> str:
    """The `tfds build` command that prepares the TFDS datasets `names` for this loader."""
    return f"tfds build {' '.join(names)} --data_dir={data_dir} --file_format=array_record"


def prepare_instructions(spec: DatasetSpec, data_dir: Path, offer_download: bool = True) -> str:
    """The exact commands that prepare `spec` for this loader."""
    download = f", or set {DOWNLOAD_ENV}=1 to let TFDS prepare it when first loaded"
    return (
        f"prepare it once on a machine with network: {PREPARE_PACKAGES}; then "
        f"{build_command([spec.source_name], data_dir)}; or copy such a prepared folder "
        f"{data_dir / spec.source_name.split('/')[0]} from another machine (pass its parent "
        f"as data_dir or set TFDS_DATA_DIR){download if offer_download else ''}"
    )


def prepared_state(spec: DatasetSpec, data_dir: Path) -> str:
    """From the files alone: 'cached' (this loader's cache), 'prepared' (an array_record
    version folder), 'other_format' (prepared, but not as array_record) or 'missing'."""
    if cache_path(spec, data_dir).is_file():
        return "cached"
    folder = data_dir / spec.source_name
    versions = sorted(p.parent for p in folder.glob("*/dataset_info.json"))
    if not versions:
        return "missing"
    for version in versions:
        if any(".array_record" in f.name for f in version.iterdir()):
            return "prepared"
    return "other_format"


def not_prepared(spec: DatasetSpec, data_dir: Path, looked: str, why: str = "") -> InputError:
    """The one-line error for a dataset that is not at hand: where, why and how to fix
    (`why` says why downloading failed, if it was tried)."""
    how = prepare_instructions(spec, data_dir, offer_download=not why)
    folder = data_dir / spec.source_name.split("/")[0]
    if folder.exists():  # something is there, but no readable prepared version
        how = (
            f"{folder} exists but holds no readable prepared dataset (incomplete or "
            f"corrupted): delete it, then {how}"
        )
    return InputError(f"dataset {spec.name}: not prepared in {looked}{why}; {how}")


def cache_path(spec: DatasetSpec, data_dir: Path) -> Path:
    return data_dir / CACHE_FOLDER / (spec.source_name.replace("/", "__") + ".npz")


def load_tfds(
    spec: DatasetSpec,
    data_dir: str | os.PathLike | None = None,
    download: bool = False,
    cache: bool = True,
) -> RawDataset:
    """The raw arrays of a TFDS dataset: from the cache, else read (and cached).

    A dataset that is not prepared is an InputError saying where it looked and how to
    prepare it, unless `download` lets TFDS prepare it (TensorFlow and network needed)."""
    root = resolve_data_dir(data_dir)
    path = cache_path(spec, root)
    if cache and path.exists():
        return read_cache(path, spec)
    raw = read_tfds(spec, root, download=download, looked=where_looked(data_dir))
    if cache:
        write_cache(path, raw)
    return raw


def write_cache(path: Path, raw: RawDataset) -> None:
    """Writes the arrays atomically (a crash never leaves a half-written cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **raw._asdict())
    os.replace(tmp, path)


def read_cache(path: Path, spec: DatasetSpec) -> RawDataset:
    """The cached arrays, checked for the fields, shapes and label range of `spec`."""
    try:
        with np.load(path, allow_pickle=False) as f:
            raw = RawDataset(**{k: f[k] for k in RawDataset._fields})
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise corrupted(path, f"unreadable ({type(e).__name__}: {e})") from None
    for split in ("train", "test"):
        x, y = getattr(raw, f"x_{split}"), getattr(raw, f"y_{split}")
        if x.ndim != 2 or x.shape[1] != spec.input_dim or y.shape != (x.shape[0],):
            raise corrupted(
                path,
                f"{split} arrays have shapes {x.shape}, {y.shape}; expected [n, "
                f"{spec.input_dim}] and [n]",
            )
        if len(y) and (y.min() < 0 or y.max() >= spec.num_classes):
            raise corrupted(path, f"{split} labels outside 0..{spec.num_classes - 1}")
    return raw


def corrupted(path: Path, why: str) -> InputError:
    return InputError(
        f"dataset cache {path}: {why}; allowed: a cache written by this loader. "
        f"Delete the file and load again (it is rebuilt from the prepared TFDS data)"
    )


def _builder(spec: DatasetSpec, data_dir: Path, download: bool, looked: str):
    """A TFDS builder for a prepared dataset, preparing it first if `download` allows."""
    if not download and prepared_state(spec, data_dir) == "missing":
        raise not_prepared(spec, data_dir, looked)  # nothing there: no need to ask TFDS
    import tensorflow_datasets as tfds
    import tensorflow_datasets.structured  # noqa: F401  (registers iris, wine_quality, ...)

    try:  # a prepared dataset loads from its files: no dataset code, no TensorFlow
        return tfds.core.read_only_builder.builder_from_files(
            spec.source_name, data_dir=str(data_dir)
        )
    except tfds.core.DatasetNotFoundError:
        pass
    except Exception as e:  # files found but unreadable (a broken dataset_info.json, ...)
        raise InputError(
            f"dataset {spec.name}: the prepared TFDS files in {looked} could not be opened "
            f"({type(e).__name__}: {str(e)[:200]}); allowed: an intact prepared dataset. "
            f"Delete {data_dir / spec.source_name.split('/')[0]} and "
            f"{prepare_instructions(spec, data_dir)}"
        ) from None
    if not download:
        raise not_prepared(spec, data_dir, looked)
    try:  # TFDS's progress lines go to stderr: stdout may be a JSON answer
        builder = tfds.builder(spec.source_name, data_dir=str(data_dir), file_format="array_record")
        with contextlib.redirect_stdout(sys.stderr):
            builder.download_and_prepare()
    except ModuleNotFoundError:  # TensorFlow (or a package TFDS prepares with) is missing
        raise not_prepared(
            spec,
            data_dir,
            looked,
            ", and preparing it here failed: preparing TFDS data needs TensorFlow and "
            "packages that are not all installed",
        ) from None
    except Exception as e:  # no network, a failed download: say how to fix
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise not_prepared(
            spec,
            data_dir,
            looked,
            f", and preparing it here failed ({type(e).__name__}: {reason[:200]}; network needed)",
        ) from None
    return builder


def _read_split(builder, split: str, spec: DatasetSpec) -> tuple[np.ndarray, np.ndarray]:
    """All examples of a split as flattened inputs [n, d] and int32 labels [n]."""
    source = builder.as_data_source(split=split)
    n = len(source)
    xs, ys = [], []
    # one record at a time: TFDS's mock data source (used by the tests) breaks __getitems__;
    # the cost is paid once, then the arrays come from the cache.
    for i in range(n):
        row = source[i]
        xs.append(_features(row, spec))
        ys.append(int(row["label"]))
    dtype = np.uint8 if spec.kind == "image" else np.float64
    x = np.asarray(xs, dtype).reshape(n, -1) if n else np.zeros((0, spec.input_dim), dtype)
    return x, np.asarray(ys, np.int32)


def _features(row: dict, spec: DatasetSpec) -> np.ndarray:
    """One example's inputs, flattened (a dict of features is concatenated by sorted key)."""
    if spec.kind == "image":
        return np.asarray(row["image"]).reshape(-1)
    features = row["features"]
    if isinstance(features, dict):
        return np.asarray([np.asarray(features[k], np.float64) for k in sorted(features)])
    return np.asarray(features, np.float64).reshape(-1)


def read_tfds(
    spec: DatasetSpec, data_dir: Path, download: bool = False, looked: str | None = None
) -> RawDataset:
    """Reads a TFDS dataset and splits it as the reference does.

    Structured datasets have one `train` split: train = its first num_train rows, test = its
    last num_test rows. Image datasets use the `train` and `test` splits as they are.
    """
    builder = _builder(spec, data_dir, download, looked or str(data_dir))
    file_format = getattr(getattr(builder, "info", None), "file_format", None)
    if file_format is not None and str(getattr(file_format, "value", file_format)) not in (
        "array_record",
    ):
        raise InputError(
            f"dataset {spec.name}: prepared in {data_dir} as {file_format}; allowed: "
            f"array_record (readable without TensorFlow). Convert it with tfds convert_format "
            f"--dataset_dir=<its version folder> --out_file_format=array_record, or "
            f"{prepare_instructions(spec, data_dir)}"
        )
    try:
        x_train, y_train = _read_split(builder, "train", spec)
        if spec.kind == "structured":
            n_test = min(spec.num_test, max(len(y_train) - 1, 0))
            x_test, y_test = x_train[len(y_train) - n_test :], y_train[len(y_train) - n_test :]
            x_train, y_train = x_train[: spec.num_train], y_train[: spec.num_train]
        else:
            x_test, y_test = _read_split(builder, "test", spec)
    except InputError:
        raise
    except Exception as e:  # unreadable or truncated array_record files
        raise InputError(
            f"dataset {spec.name}: the prepared TFDS files in {data_dir} could not be read "
            f"({type(e).__name__}: {str(e)[:200]}); allowed: intact array_record files. "
            f"Delete {data_dir / spec.source_name.split('/')[0]} and "
            f"{prepare_instructions(spec, data_dir)}"
        ) from None
    if x_train.shape[1] != spec.input_dim:
        raise InputError(
            f"dataset {spec.name}: inputs have {x_train.shape[1]} features; allowed: "
            f"{spec.input_dim} (the reference's table); the prepared data is not this dataset"
        )
    return RawDataset(x_train, y_train, x_test, y_test)
