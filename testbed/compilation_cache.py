"""JAX's persistent compilation cache for testbed: the command line's, and the library's.

Jitted code compiles once per machine instead of once per process: a C2ST's first call in
a fresh process drops from mostly compilation to about its warm time (see the README's
Speed section). Cached executables are the same code, so numbers do not change.

One folder and one opt-out for both uses: `TESTBED_JAX_CACHE` = a folder (default
`$XDG_CACHE_HOME/testbed/jax`, else `~/.cache/testbed/jax`) or `off`. A cache the user
configured for JAX itself (`JAX_COMPILATION_CACHE_DIR`, or `jax_compilation_cache_dir`
set with `jax.config.update`) is never overridden: testbed then compiles into that one.

- The command line and sweep workers own their process: `enable_compilation_cache()` turns
  the cache on for the whole process, and returns the variables that turn it on in the
  processes it starts (an executor puts them in its workers' environment).
- Library calls (`testbed.metrics.c2st`, `LC2ST`, the joint-KL estimators and every
  evaluator run by `testbed.evaluate`) configure it once per process, at the first such
  call, and only when JAX has no cache folder then: JAX's folder becomes ours (public
  `jax.config`), and stays so. To use a cache of your own, configure JAX's before
  testbed's first call (`JAX_COMPILATION_CACHE_DIR`, or `jax.config.update`), or set
  `TESTBED_JAX_CACHE=off`.

`StoredPrograms` keeps the metric classifiers' compiled programs whole in the same folder
(`testbed-programs/`), so a fresh process does not even trace them.

No size cap: JAX's LRU eviction keeps an access-time file per entry, and a process killed
between the two writes breaks every later write to the folder; entries are small (a C2ST
or L-C2ST run adds 0.1-1 MB), and the folder can be deleted at any time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from testbed import settings

# JAX writes only programs that took at least this long to compile (its default: 1 s).
# 0: every program. A cache read of a small program costs about a millisecond, its
# compilation 10-100 ms, and a first call compiles many small ones besides the big ones
# (keys, environment draws, reductions): with 0.2 s those compiled again in every process
# (`testbed run --agent mlp` with a warm cache: 1.5x -> 2.8x-3.1x, README Speed section).
MIN_COMPILE_SECS = 0.0

F = TypeVar("F", bound=Callable[..., Any])


def cache_folder(environ: Mapping[str, str] | None = None) -> str | None:
    """The testbed cache folder `environ` (default: this process's) asks for; None = off.

    None also when `JAX_COMPILATION_CACHE_DIR` is set: the user's own cache for JAX.
    """
    chosen = settings.current() if environ is None else settings.Settings.from_env(environ)
    return chosen.jax_cache


def compilation_cache_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables that turn testbed's cache on in a new process ({} = off).

    JAX reads them on import; workers get them from their driver. See the module docstring
    for the folder and the opt-out.
    """
    folder = cache_folder(environ)
    if folder is None:
        return {}
    return {
        "JAX_COMPILATION_CACHE_DIR": folder,
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": str(MIN_COMPILE_SECS),
    }


def enable_compilation_cache() -> dict[str, str]:
    """Turns testbed's cache on for this whole process (jax.config, which works after JAX
    is imported, before a compilation). For processes testbed owns: the command line and
    sweep workers. Returns the variables that turn it on in a child process ({} when off
    or when the user's JAX_COMPILATION_CACHE_DIR is set): its starter passes them on."""
    env = compilation_cache_env()
    if env:
        import jax

        jax.config.update("jax_compilation_cache_dir", env["JAX_COMPILATION_CACHE_DIR"])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECS)
    return env


_lock = threading.Lock()
_decided = False  # whether this process's first library call has configured the cache
_ours: str | None = None  # the folder it made JAX's (None: none)


def _reset_jax_cache() -> None:
    """JAX's cache object back to 'not built': the next compilation builds it from the
    folder configured then (or none)."""
    from jax.experimental.compilation_cache import compilation_cache as cc

    cc.reset_cache()


def _writable(folder: str) -> bool:
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def configure_once() -> str | None:
    """At the first call in a process: testbed's folder as JAX's compilation cache, unless
    JAX has one already, the folder cannot be written, or TESTBED_JAX_CACHE=off. Later
    calls change nothing. Returns the folder JAX compiles into for testbed (None: none
    of ours)."""
    global _decided, _ours
    with _lock:
        if not _decided:
            _decided = True
            _ours = _turn_on()
    return _testbed_folder_active()


def _turn_on() -> str | None:
    import jax

    folder = cache_folder()
    if folder is None or jax.config.jax_compilation_cache_dir is not None:
        return None  # off, or the user's own cache (used as it is)
    if not jax.config.jax_enable_compilation_cache or not _writable(folder):
        return None
    _reset_jax_cache()  # a cache object the user once built for a folder since unset
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECS)
    return folder


@contextlib.contextmanager
def library_cache() -> Iterator[None]:
    """Within: the compilation cache as `configure_once` leaves it (a library entry point's
    context)."""
    configure_once()
    yield


def with_library_cache(fn: F) -> F:
    """`fn` run after `configure_once()` (a decorator for the library's entry points)."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        configure_once()
        return fn(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


STORE_FORMAT = "testbed-programs-2"  # 2: copies checked before they are kept


def _testbed_folder_active() -> str | None:
    """Testbed's cache folder when JAX compiles into it now (configured by a library call
    or the command line), else None (cache off, or the user's own folder: left to JAX)."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current is not None and current in (_ours, cache_folder()):
        return current
    return None


@functools.cache
def _machine() -> str:
    """What a compiled CPU program depends on besides its code: versions, the backend and
    the processor's instruction set (XLA compiles for the host's)."""
    import jax
    import jaxlib

    from testbed import threefry_cpu

    device = jax.devices()[0]
    parts = [
        STORE_FORMAT,
        jax.__version__,
        jaxlib.__version__,
        device.platform,
        device.client.platform_version,
        device.device_kind,
        str(jax.device_count()),
        settings.current().xla_flags,
        f"threefry={threefry_cpu.lowering()}",
    ]
    try:
        with open("/proc/cpuinfo") as f:
            parts += sorted({line for line in f if line.startswith(("flags", "model name"))})
    except OSError:
        import platform

        parts.append(platform.processor())
    return "\n".join(parts)


# JAX's settings that change a traced program; read through the public `jax.config`.
TRACE_SETTINGS = (
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_numpy_rank_promotion",
    "jax_numpy_dtype_promotion",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_enable_checks",
    "jax_disable_jit",
    "jax_softmax_custom_jvp",
)


def _trace_settings() -> str | None:
    """The values of TRACE_SETTINGS (a stored program is kept per their values), or None
    when this JAX lacks one of them (then programs are not stored)."""
    import jax

    try:
        values = [getattr(jax.config, name) for name in TRACE_SETTINGS]
    except AttributeError:  # a JAX without one of them: no stored programs, JAX's cache only
        return None
    return ",".join(f"{n}={v!r}" for n, v in zip(TRACE_SETTINGS, values))


class StoredPrograms:
    """Compiled programs of one jitted function, by its static arguments and the shapes
    of the others, kept in memory and, when testbed's cache folder is active, on disk.

    JAX's persistent cache skips compilation, but a fresh process still traces and lowers
    the function to find the entry (for the metric classifiers' epoch, 60 ms of a 0.25 s
    first C2ST call). A stored program skips those too: it is the serialized executable,
    found by a key of the function's name, the static arguments, the shapes and dtypes of
    the others, the source files the traced code lives in (`sources`), JAX's and jaxlib's
    versions, JAX's tracing settings, the backend, XLA_FLAGS and the processor; when any
    of these differs, the program is compiled again (through JAX, and its cache). A file
    that does not load is ignored and replaced. Files are written whole (renamed into
    place), so processes sharing the folder never read half a file.
    """

    def __init__(self, jitted: Callable, name: str, sources: tuple[str, ...]):
        self.jitted, self.name, self.sources = jitted, name, sources
        self._memory: dict[Any, Any] = {}
        self._lock = threading.Lock()

    @functools.cached_property
    def _source_hash(self) -> str | None:
        import hashlib

        digest = hashlib.sha256()
        try:
            for path in self.sources:
                with open(path, "rb") as f:
                    digest.update(f.read())
        except OSError:
            return None
        return digest.hexdigest()

    def program(self, args: tuple, static: Mapping[str, Any]) -> Callable:
        """The compiled program for `jitted(*args, **static)` (static: the jitted function's
        static arguments, by name): call it with `*args`."""
        import jax

        leaves, tree = jax.tree_util.tree_flatten(args)
        shapes = tuple(str(jax.typeof(a)) for a in leaves)
        key = (tuple(sorted(static.items())), shapes, str(tree))
        found = self._memory.get(key)
        if found is None:
            with self._lock:
                found = self._memory.get(key)
                if found is None:
                    found = self._memory[key] = self._load_or_compile(key, args, static)
        return found

    def _load_or_compile(self, key, args: tuple, static: Mapping[str, Any]) -> Callable:
        folder = _testbed_folder_active()
        settings = _trace_settings()
        path = None
        if folder is not None and settings is not None and self._source_hash is not None:
            import hashlib

            text = "\n".join([_machine(), settings, self._source_hash, self.name, repr(key)])
            digest = hashlib.sha256(text.encode()).hexdigest()[:32]
            path = os.path.join(folder, "testbed-programs", f"{self.name}-{digest}.bin")
            loaded = _load_program(path)
            if loaded is not None:
                return _Checked(loaded, path, lambda: self._compile(args, static))
        compiled = self._compile(args, static)
        if path is not None:
            _store_program(path, compiled, args)
        return compiled

    def _compile(self, args: tuple, static: Mapping[str, Any]):
        return self.jitted.trace(*args, **static).lower().compile()


class _Checked:
    """A program loaded from a file, run once under watch: if it fails (a file written by
    an older testbed, or damaged), the file is removed and the program compiled instead.
    The programs are pure functions of their inputs, so running again is safe."""

    def __init__(self, program, path: str, compile_: Callable[[], Any]):
        self._program, self._path, self._compile = program, path, compile_
        self._checked = False

    def __call__(self, *args):
        if self._checked:
            return self._program(*args)
        import jax

        try:
            out = jax.block_until_ready(self._program(*args))
        except Exception:  # a cache is never the reason a metric fails
            with contextlib.suppress(OSError):
                os.unlink(self._path)
            self._program = self._compile()
            out = self._program(*args)
        self._checked = True
        return out


def _load_program(path: str):
    import pickle

    from jax.experimental import serialize_executable

    try:
        with open(path, "rb") as f:
            payload, in_tree, out_tree = pickle.load(f)
        return serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
    except FileNotFoundError:
        return None
    except Exception:  # unreadable or stale: compile, and replace it
        return None


def _store_program(path: str, compiled, args: tuple) -> None:
    """Writes `compiled` to `path` if its serialized copy runs and gives the same outputs
    on `args`. Not every executable survives serialization: one JAX itself loaded from its
    persistent cache serializes without its kernels ("Function ... not found" when run),
    so each copy is loaded and run once here before it is kept."""
    import pickle
    import tempfile

    import jax
    import numpy as np
    from jax.experimental import serialize_executable

    tmp = None
    try:
        blob = pickle.dumps(serialize_executable.serialize(compiled))
        copy = serialize_executable.deserialize_and_load(*pickle.loads(blob))
        want = jax.tree_util.tree_leaves(compiled(*args))
        got = jax.tree_util.tree_leaves(copy(*args))
        if len(want) != len(got) or not all(
            np.array_equal(np.asarray(w), np.asarray(g), equal_nan=True) for w, g in zip(want, got)
        ):
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except Exception:  # a cache: never the reason a metric fails
        if tmp is not None:
            with contextlib.suppress(Exception):
                os.unlink(tmp)
