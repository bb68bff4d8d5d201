"""nutpie's compile of a PyMC model, its machine code kept on disk for later processes.

What costs: `nutpie.compile_pymc_model(model)` (numba backend) has PyTensor build numba
functions of the log density with its gradient and of the draws' expansion (graph rewrites;
PyTensor keeps their numba code on disk itself), then has numba compile two C callbacks
(`numba.cfunc`) around them, LLVM optimising each with everything it calls inlined. For
`wyb/16` in a fresh process here: 0.7 s PyTensor, 11.2 s + 0.9 s the two callbacks, every
process. numba can keep a callback on disk (`cache=True`), but it finds an entry by a hash
of the function's closure, which holds numba dispatchers with a random id in every process:
the entry is written and never found again. The compiled model cannot be pickled either
(pickle: a local function; cloudpickle: a generator inside numba's objects): its callbacks
are machine code in numba's JIT engine, handed to nutpie's Rust sampler as addresses.

`compile_pymc_model` here compiles a model as `nutpie.compile_pymc_model(model)` does at its
defaults (nutpie's own helpers, called in nutpie's order) and keeps each callback's compiled
code (what numba's own cache keeps: object code and its metadata) in a file named by a key
of what that code is compiled from: PyTensor's cache keys of the two graphs (each operation,
its settings, the constants and the wiring), nutpie's data layout (names, dtypes and ranks
of the shared variables; numba compiles for these types), this module's recipe (`FORMAT`,
the callbacks' bytecode), the versions of nutpie, numba, llvmlite, PyTensor, PyMC, NumPy
and Python, and the CPU numba compiles for. A later process with the same key loads the
code (0.1-0.5 s; `compile_seconds` of `wyb/16`: 14.1 s, then 0.8 s) instead of compiling it;
the code is the same, so the draws are too. Data and sizes are not in the key: the callbacks
read them at run time (`with_data`), so problems of one family and dimension share it.

A file that cannot be read or loaded (or fails its checksum) is set aside (renamed
`*.nbc.bad`) and the callback compiled again. Nothing is kept when PyTensor gives no key
(its numba cache off, `PYTENSOR_FLAGS=numba__cache=False`, or a graph it does not cache),
when numba's code holds addresses of this process (a constant array over 1 MB), or when
the installed nutpie is not a release whose steps this module repeats (`REPLICATED`): then
the model is compiled in each process, as nutpie does.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = 1  # this module's file format and callback recipe: a change bumps it
REPLICATED = "0.16."  # the nutpie releases whose compile this module repeats step by step
PACKAGES = ("nutpie", "numba", "llvmlite", "pytensor", "pymc", "numpy")


def cache_folder() -> Path:
    """Where the callbacks are kept: `nutpie/` in PyTensor's compile folder
    (`base_compiledir`, `~/.pytensor` by default), beside PyTensor's own numba cache."""
    import pytensor

    return Path(pytensor.config.base_compiledir) / "nutpie"


def compile_pymc_model(model, folder: Path | None = None) -> Any:
    """`nutpie.compile_pymc_model(model)`, its two numba callbacks loaded from `folder`
    (default `cache_folder()`) when a process compiled them before, else compiled and kept
    there. `.cache_hits` of each callback (`compiled_logp_func`, `compiled_expand_func`)
    says which: 1 loaded, 0 compiled."""
    import nutpie
    from nutpie import compile_pymc as cp
    from pymc.initial_point import make_initial_point_fn

    if not version("nutpie").startswith(REPLICATED):
        return nutpie.compile_pymc_model(model)  # its helpers may differ: nothing kept
    folder = cache_folder() if folder is None else Path(folder)

    # nutpie.compile_pymc_model at its defaults (numba backend), in nutpie's steps
    pymc_initial_point = cp._wrap_with_lock(
        make_initial_point_fn(
            model=model,
            overrides=None,
            default_strategy="support_point",
            jitter_rvs=set(model.free_RVs),
            return_transformed=True,
        )
    )
    n_dim, n_expanded, logp_pt, expand_pt, initial_point, shape_info = cp._make_functions(
        model,
        mode="NUMBA",
        compute_grad=True,
        join_expanded=True,
        pymc_initial_point_fn=pymc_initial_point,
        var_names=None,
    )
    shared_vars: dict[str, Any] = {}
    for var in [*logp_pt.get_shared(), *expand_pt.get_shared()]:
        if shared_vars.setdefault(var.name, var) is not var:
            raise ValueError(f"Shared variables must have unique names: {var.name}")
    shared_data = {}
    for name, var in shared_vars.items():
        shared_data[name] = np.array(var.get_value(), order="C", copy=True)
        shared_data[name].flags.writeable = False
    user_data = cp.make_user_data(shared_vars, shared_data)
    logp_names = [var.name for var in logp_pt.get_shared()]
    expand_names = [var.name for var in expand_pt.get_shared()]
    logp_py, logp_sig = cp._make_c_logp_func(
        n_dim, logp_pt.vm.jit_fn, user_data, logp_names, shared_data
    )
    expand_py, expand_sig = cp._make_c_expand_func(
        n_dim, n_expanded, expand_pt.vm.jit_fn, user_data, expand_names, shared_data
    )

    key = model_key(
        [logp_pt, expand_pt],
        [logp_py, expand_py],
        (n_dim, n_expanded, str(user_data.dtype), logp_names, expand_names),
        shared_data,
    )
    dims, coords = cp._prepare_dims_and_coords(model, shape_info)
    return cp.CompiledPyMCModel(
        _n_dim=n_dim,
        dims=dims,
        _coords=coords,
        _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info, strict=True)},
        compiled_logp_func=_cfunc(logp_py, logp_sig, folder, key and f"{key}-logp"),
        compiled_expand_func=_cfunc(expand_py, expand_sig, folder, key and f"{key}-expand"),
        initial_point_func=initial_point,
        shared_data=shared_data,
        user_data=user_data,
        n_expanded=n_expanded,
        shape_info=shape_info,
        logp_func=logp_pt,
        expand_func=expand_pt,
    )


def model_key(functions, callbacks, layout, shared_data) -> str | None:
    """The name of a model's compiled callbacks: a hash of all their code is compiled
    from (module docstring); None when PyTensor has no cache key for a graph."""
    from numba.core.registry import cpu_target
    from pytensor.link.numba.cache import CACHED_SRC_FUNCTIONS

    graphs = [CACHED_SRC_FUNCTIONS.get(fn.vm.jit_fn.py_func) for fn in functions]
    if None in graphs:
        return None
    parts = (
        FORMAT,
        sys.version,
        [(name, version(name)) for name in PACKAGES],
        cpu_target.target_context.codegen().magic_tuple(),
        graphs,
        [hashlib.sha256(fn.__code__.co_code).hexdigest() for fn in callbacks],
        layout,
        [(name, value.dtype.str, value.ndim) for name, value in shared_data.items()],
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def _cfunc(py_func, signature, folder: Path, name: str | None):
    """numba's C callback of `py_func`, its compiled code kept in `folder/name.nbc` (none
    kept when `name` is None)."""
    from numba.core import sigutils
    from numba.core.caching import NullCache
    from numba.core.ccallback import CFunc

    # what `numba.cfunc(signature)(py_func)` does, with a cache object of ours
    callback = CFunc(py_func, sigutils.normalize_signature(signature), locals={}, options={})
    # numba's own hook: `CFunc.enable_caching` puts its cache object in this attribute
    callback._cache = NullCache() if name is None else KeptCode(folder / f"{name}.nbc")
    callback.compile()  # loads from the cache, or compiles and saves
    return callback


class KeptCode:
    """One compiled callback in one file, for the two calls `CFunc.compile` makes of its
    cache (`load_overload`, `save_overload`): numba's cache format (`CompileResult._reduce`,
    object code and metadata) under a name of ours."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def load_overload(self, sig, target_context):
        """The compiled callback kept in the file, or None: none kept, or a file that cannot
        be read, fails its checksum (a torn or altered file is never handed to LLVM) or
        cannot be loaded, which is set aside (the callback is then compiled again)."""
        from numba.core.compiler import CompileResult

        try:
            content = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            self._set_aside()
            return None
        digest, payload = content[:32], content[32:]
        try:
            if hashlib.sha256(payload).digest() != digest:
                raise ValueError("checksum")
            target_context.refresh()
            return CompileResult._rebuild(target_context, *pickle.loads(payload))
        except Exception:  # noqa: BLE001  (any failure to load: compile again)
            self._set_aside()
            return None

    def save_overload(self, sig, cres):
        """Keep the compiled callback (its checksum, then numba's payload; written whole,
        then renamed into place), unless its code holds addresses of this process. A
        failure to write keeps nothing and is no error: the callback is compiled."""
        from numba.core.serialize import dumps

        if cres.library.has_dynamic_globals or cres.lifted:
            return
        temporary = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex[:12]}.tmp")
        try:
            payload = dumps(cres._reduce())
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(hashlib.sha256(payload).digest() + payload)
            os.replace(temporary, self.path)
        except Exception:  # noqa: BLE001  (an unwritable folder, an unpicklable payload)
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)

    def _set_aside(self) -> None:
        """The unloadable file renamed `*.nbc.bad` (kept for a look, replaced by the next)."""
        with contextlib.suppress(OSError):
            os.replace(self.path, self.path.with_name(self.path.name + ".bad"))
