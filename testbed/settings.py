"""testbed's settings: the `TESTBED_*` environment variables, read and checked here alone.

`Settings.from_env()` takes a snapshot of the variables (and the few of others' that decide
something of ours: the cache home, JAX's cache folder and XLA's flags, TFDS's data folder,
PyTensor's flags, Ray's cluster address); each property checks its own value when asked,
with the error that names the variable, so a bad value fails where it is used, as a
missing one falls back to its default. This module is the only one of the product that
reads the process's environment (tests/test_settings.py checks it).

Each entry point installs its settings once: the command line reads the environment once
per command and keeps that snapshot in force while the command runs
(`experiments.console.interruptible`); a sweep's worker gets its driver's explicitly
(`Settings` pickles) and `install`s them at its start. Other modules ask `current()`: the
settings installed, else (a library call with no entry point: a script, a notebook, a
test) the environment as it is now. `Settings.environ()` gives them as variables for a
child process that reads its own.

| variable               | property            | what                                      |
|------------------------|---------------------|-------------------------------------------|
| TESTBED_THREADS        | threads             | our thread pools' cap (unset: all cores)  |
| TESTBED_PROGRESS       | progress            | auto, lines or off                        |
| TESTBED_MEMORY_GB      | memory_gb           | the memory the size bounds are taken from |
| TESTBED_JAX_CACHE      | jax_cache           | the compilation cache folder, or off      |
| TESTBED_THREEFRY       | threefry            | unrolled (default) or rolled              |
| TESTBED_CHECKPOINTS    | checkpoints         | long trainings' checkpoint folder, or off |
| TESTBED_WORKER         | worker              | this process is a sweep's worker          |
| TESTBED_TFDS_DOWNLOAD  | tfds_download       | let TFDS prepare a missing dataset        |
| TESTBED_CATALOG        | catalog             | the registries' index folder, or off      |

The module imports only the standard library when it is loaded (its errors' module when one
is raised): the command line's index (`experiments.catalog`) loads this file by its path to
read the variables before any package, the testbed's included (JAX), is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

THREADS = "TESTBED_THREADS"
PROGRESS = "TESTBED_PROGRESS"
MEMORY_GB = "TESTBED_MEMORY_GB"
JAX_CACHE = "TESTBED_JAX_CACHE"
THREEFRY = "TESTBED_THREEFRY"
CHECKPOINTS = "TESTBED_CHECKPOINTS"
WORKER = "TESTBED_WORKER"
TFDS_DOWNLOAD = "TESTBED_TFDS_DOWNLOAD"
CATALOG = "TESTBED_CATALOG"
VARIABLES = (THREADS, PROGRESS, MEMORY_GB, JAX_CACHE, THREEFRY, CHECKPOINTS, WORKER, TFDS_DOWNLOAD,
             CATALOG)  # fmt: skip
# not ours, but they decide something of ours: the cache folders, the stored programs' key
# (XLA's flags), the datasets' folder, PyTensor's BLAS, the Ray cluster a sweep joins
TFDS_DATA_DIR = "TFDS_DATA_DIR"
XLA_FLAGS = "XLA_FLAGS"
PYTENSOR_FLAGS = "PYTENSOR_FLAGS"
RAY_ADDRESS = "RAY_ADDRESS"
CONTEXT = ("JAX_COMPILATION_CACHE_DIR", "XDG_CACHE_HOME", TFDS_DATA_DIR, XLA_FLAGS, PYTENSOR_FLAGS,
           RAY_ADDRESS)  # fmt: skip
# set for TensorFlow's import in this process (`quiet_tensorflow`)
TF_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"

PROGRESS_MODES = ("auto", "lines", "off")
THREEFRY_CHOICES = ("unrolled", "rolled")
JAX_CACHE_OFF = ("off", "0", "false", "no")
GB = 2**30


@dataclasses.dataclass(frozen=True)
class Settings:
    """The variables of VARIABLES and CONTEXT that were set, as (name, value) pairs; the
    properties give their checked values (see the module docstring)."""

    values: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings `environ` (default: this process's environment, read now) holds:
        the one place testbed reads its variables."""
        environ = os.environ if environ is None else environ
        names = sorted(VARIABLES + CONTEXT)  # one order: equal settings compare equal
        return cls(tuple((n, environ[n]) for n in names if n in environ))

    def get(self, name: str) -> str | None:
        """The raw value of variable `name`, None when it is not set."""
        return dict(self.values).get(name)

    def replace(self, **variables: str | None) -> Settings:
        """These settings with variables set (a value) or unset (None), by name."""
        values = dict(self.values)
        for name, value in variables.items():
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value
        return Settings(tuple(sorted(values.items())))

    def environ(self) -> dict[str, str]:
        """The TESTBED_* variables of these settings, for a child process's environment."""
        return {n: v for n, v in self.values if n in VARIABLES}

    def _number(self, name: str, cast: type, ok, allowed: str):
        """The variable `name` as a number (None: unset); refused, naming what is allowed,
        when it does not parse or `ok` says no."""
        given = (self.get(name) or "").strip()
        if not given:
            return None
        try:
            value = cast(given)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise _errors().InputError(f"{name}: got {given!r}; allowed: {allowed}")
        return value

    @property
    def threads(self) -> int | None:
        """The cap on our thread pools (None: unset)."""
        return self._number(THREADS, int, lambda n: n >= 1, "an integer >= 1, or unset")

    @property
    def progress(self) -> str:
        """What long work says: auto, lines or off."""
        mode = (self.get(PROGRESS) or "auto").strip().lower() or "auto"
        if mode not in PROGRESS_MODES:
            raise _errors().bad_value(PROGRESS, mode, PROGRESS_MODES)
        return mode

    @property
    def memory_gb(self) -> float | None:
        """The memory the size bounds are taken from, in GB (None: the machine's)."""
        return self._number(MEMORY_GB, float, lambda gb: 0 < gb < math.inf, "a number of GB > 0")

    @property
    def jax_cache(self) -> str | None:
        """testbed's compilation cache folder; None when off, or when the user set
        JAX_COMPILATION_CACHE_DIR (their own cache for JAX)."""
        choice = (self.get(JAX_CACHE) or "").strip()
        if choice.lower() in JAX_CACHE_OFF or self.get("JAX_COMPILATION_CACHE_DIR") is not None:
            return None
        home = self.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return choice or os.path.join(home, "testbed", "jax")

    @property
    def catalog(self) -> Path | None:
        """The folder of the command line's index of the registries (`experiments.catalog`);
        None when `TESTBED_CATALOG=off`."""
        chosen = (self.get(CATALOG) or "").strip()
        if chosen.lower() == "off":
            return None
        if chosen:
            return Path(chosen).expanduser()
        home = self.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(home) / "testbed" / "catalog"

    @property
    def threefry(self) -> str:
        """The CPU lowering of threefry asked for (a bad value: the default, see
        `threefry_refused`)."""
        choice = self._threefry_choice()
        return choice if choice in THREEFRY_CHOICES else "unrolled"

    @property
    def threefry_refused(self) -> str | None:
        """Why TESTBED_THREEFRY's value was not taken (None: it was, or it is unset). A
        warning, not an error: the bits are the same either way."""
        choice = self._threefry_choice()
        if choice in THREEFRY_CHOICES:
            return None
        return f"{_errors().bad_value(THREEFRY, choice, THREEFRY_CHOICES)} (using the default)"

    def _threefry_choice(self) -> str:
        return (self.get(THREEFRY) or "unrolled").strip().lower() or "unrolled"

    @property
    def checkpoints(self) -> Path | None:
        """The checkpoint folder of long trainings (None: unset, empty or 'off')."""
        value = (self.get(CHECKPOINTS) or "").strip()
        return None if value.lower() in ("", "off") else Path(value)

    @property
    def worker(self) -> bool:
        """Whether this process is a sweep's worker (what its driver said, it does not)."""
        return bool(self.get(WORKER))

    @property
    def tfds_download(self) -> bool:
        """Whether TFDS may prepare a missing dataset (default: no)."""
        raw = self.get(TFDS_DOWNLOAD)
        value = (raw or "0").strip().lower()
        if value in ("", "0", "false", "no"):
            return False
        if value in ("1", "true", "yes"):
            return True
        raise _errors().InputError(
            f"{TFDS_DOWNLOAD}: got {raw!r}; allowed: 0 (the default: never "
            "download) or 1 (let TFDS prepare a missing dataset: TensorFlow and network needed)"
        )

    @property
    def tfds_data_dir(self) -> str | None:
        """TFDS's data folder as `TFDS_DATA_DIR` names it (None: unset or empty)."""
        return self.get(TFDS_DATA_DIR) or None

    @property
    def xla_flags(self) -> str:
        """XLA's flags (`XLA_FLAGS`; '' when unset): a compiled program depends on them."""
        return self.get(XLA_FLAGS) or ""

    @property
    def pytensor_flags(self) -> str:
        """PyTensor's flags (`PYTENSOR_FLAGS`; '' when unset)."""
        return self.get(PYTENSOR_FLAGS) or ""

    @property
    def ray_address(self) -> str | None:
        """The Ray cluster `RAY_ADDRESS` names (None: unset or blank)."""
        return (self.get(RAY_ADDRESS) or "").strip() or None


def _errors():
    """testbed.errors, imported when an error is raised: this module loads alone (see the
    module docstring)."""
    from testbed import errors

    return errors


_installed: list[Settings] = []  # `using` blocks, innermost last


def current() -> Settings:
    """The settings in force: the installed ones (the innermost `using` block's), else the
    environment's, read now (no entry point installed any: a library call)."""
    return _installed[-1] if _installed else Settings.from_env()


def install(settings: Settings) -> None:
    """`settings` in force for the rest of this process (a worker's, from its driver)."""
    _installed[:] = [settings]


def child_environ(variables: Mapping[str, str]) -> dict[str, str]:
    """The environment a child process starts with: this process's, with `variables` over
    it (a worker's thread counts and settings go to it so, never through ours)."""
    return {**os.environ, **variables}


def quiet_tensorflow() -> None:
    """TF_CPP_MIN_LOG_LEVEL=3 in this process's environment, unless the user set it: the one
    write of the process's environment in the product (tests/test_settings.py checks it).
    TensorFlow, which TFDS imports to prepare a dataset, reads its C++ log level from the
    environment alone, once, when its core library loads, so it must be set before that
    import in this very process (a child process gets it as an argument:
    `leaderboard.execution.worker.thread_env`). The command line calls it at its start."""
    os.environ.setdefault(TF_LOG_LEVEL, "3")


@contextlib.contextmanager
def using(settings: Settings) -> Iterator[Settings]:
    """Within: `settings` in force (`current()`), then what was before (blocks nest: a
    command's, then a sweep's, then its checkpoints')."""
    _installed.append(settings)
    try:
        yield settings
    finally:
        innermost = max(i for i, s in enumerate(_installed) if s is settings)
        del _installed[innermost]
