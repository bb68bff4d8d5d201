"""testbed.compilation_cache: the library's persistent compilation cache, configured once
per process, never over a cache the user configured for JAX, and the command line's
folder and opt-out."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from testbed import compilation_cache as cc
from testbed.metrics import c2st

NAMES = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")


@pytest.fixture
def jax_config(monkeypatch):
    """JAX's cache settings as they were, restored after the test (and the cache object
    reset, so no later test writes into a folder of this one). The variables the command
    line sets for its workers (`testbed.main` run in this process by other tests) are
    removed meanwhile: here no user has configured JAX's cache."""
    for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
        monkeypatch.delenv(name, raising=False)
    saved = {n: getattr(jax.config, n) for n in NAMES}
    monkeypatch.setattr(cc, "_decided", False)  # a fresh process's first call
    yield
    for n, v in saved.items():
        jax.config.update(n, v)
    cc._reset_jax_cache()


def _fresh_program(tag: float):
    """A jitted function compiled for the first time in this process (a new constant)."""
    return jax.jit(lambda a: jnp.sin(a) * tag + tag)


def _entries(folder) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.endswith("-cache")) if folder.exists() else []


def test_folder_and_opt_out_are_the_command_lines():
    assert cc.cache_folder({"XDG_CACHE_HOME": "/c"}) == "/c/testbed/jax"
    assert cc.cache_folder({"HOME": "/h"}).endswith(os.path.join(".cache", "testbed", "jax"))
    assert cc.cache_folder({"TESTBED_JAX_CACHE": " /x "}) == "/x"
    for off in ("off", "OFF", "0", "false", "no"):
        assert cc.cache_folder({"TESTBED_JAX_CACHE": off}) is None
    assert cc.cache_folder({"JAX_COMPILATION_CACHE_DIR": "/mine"}) is None  # the user's own
    env = cc.compilation_cache_env({"TESTBED_JAX_CACHE": "/x"})
    assert env["JAX_COMPILATION_CACHE_DIR"] == "/x"
    assert float(env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]) == cc.MIN_COMPILE_SECS == 0


def test_the_first_library_call_configures_the_cache_once(tmp_path, monkeypatch, jax_config):
    """No cache configured: the first library call makes testbed's folder JAX's (small
    programs too), through jax.config, and it stays; later calls change nothing."""
    monkeypatch.setenv("TESTBED_JAX_CACHE", str(tmp_path / "ours"))
    jax.config.update("jax_compilation_cache_dir", None)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    with cc.library_cache():
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "ours")
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
        _fresh_program(1.25)(np.ones(3, np.float32)).block_until_ready()
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "ours")  # it stays
    written = _entries(tmp_path / "ours")
    assert written  # a program compiled in well under JAX's 1 s threshold
    monkeypatch.setenv("TESTBED_JAX_CACHE", str(tmp_path / "other"))
    assert cc.configure_once() == str(tmp_path / "ours")  # decided once: not changed again
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "ours")


def test_a_users_cache_is_never_overridden(tmp_path, monkeypatch, jax_config):
    """The user's jax_compilation_cache_dir, set before testbed's first call, is used:
    testbed neither replaces it nor writes into a folder of its own."""
    monkeypatch.setenv("TESTBED_JAX_CACHE", str(tmp_path / "ours"))
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    cc._reset_jax_cache()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((40, 1)), rng.standard_normal((40, 1)) + 1
    c2st(a, b)
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")
    assert cc.configure_once() is None  # JAX compiles into the user's folder, not ours
    assert not _entries(tmp_path / "ours") and _entries(tmp_path / "mine")


def test_off_and_jax_env_leave_the_cache_alone(tmp_path, monkeypatch, jax_config):
    jax.config.update("jax_compilation_cache_dir", None)
    monkeypatch.setenv("TESTBED_JAX_CACHE", "off")
    with cc.library_cache():
        assert jax.config.jax_compilation_cache_dir is None
    for env in ({"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "mine")}, {}):
        monkeypatch.setattr(cc, "_decided", False)
        monkeypatch.setenv("TESTBED_JAX_CACHE", str(tmp_path))
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        if not env:  # a folder that cannot be made: quietly no cache
            (tmp_path / "file").write_text("")
            monkeypatch.setenv("TESTBED_JAX_CACHE", str(tmp_path / "file" / "jax"))
        with cc.library_cache():
            assert jax.config.jax_compilation_cache_dir is None
        monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)


@functools.partial(jax.jit, static_argnames=("power",))
def _affine(a, b, *, power: int):
    return a**power + b


def test_stored_programs_skip_tracing_in_a_new_process(tmp_path, monkeypatch, jax_config):
    """A program stored in testbed's folder is loaded by a fresh store (as in a new
    process) without tracing; other sources or static arguments are other programs, and
    a damaged file is compiled again and replaced."""
    monkeypatch.setenv("TESTBED_JAX_CACHE", str(tmp_path))
    jax.config.update("jax_compilation_cache_dir", None)
    source = tmp_path / "code.py"
    source.write_text("v1")
    args = (np.arange(4, dtype=np.float32), np.float32(1.5))
    with cc.library_cache():
        first = cc.StoredPrograms(_affine, "affine", (str(source),))
        want = np.asarray(first.program(args, {"power": 3})(*args))
        stored = sorted((tmp_path / "testbed-programs").iterdir())
        assert len(stored) == 1

        class NoTracing:
            def trace(self, *a, **k):
                raise AssertionError("traced again")

        again = cc.StoredPrograms(NoTracing(), "affine", (str(source),))
        np.testing.assert_array_equal(np.asarray(again.program(args, {"power": 3})(*args)), want)
        fresh = cc.StoredPrograms(_affine, "affine", (str(source),))
        fresh.program(args, {"power": 2})  # another static argument: another program
        source.write_text("v2")  # changed code: never the old program
        cc.StoredPrograms(_affine, "affine", (str(source),)).program(args, {"power": 3})
        assert len(list((tmp_path / "testbed-programs").iterdir())) == 3
        stored[0].write_bytes(b"damaged")
        source.write_text("v1")
        repaired = cc.StoredPrograms(_affine, "affine", (str(source),))
        np.testing.assert_array_equal(np.asarray(repaired.program(args, {"power": 3})(*args)), want)
        assert stored[0].stat().st_size > len(b"damaged")
    # with no testbed folder active (the user's own cache): compiled in memory, not stored
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))
    cc.StoredPrograms(_affine, "affine", (str(source),)).program(args, {"power": 4})
    assert len(list((tmp_path / "testbed-programs").iterdir())) == 3


def _c2st_lines(n: int, shift: float) -> str:
    """Script lines printing C2ST's accuracy on two seeded Gaussian samples of n rows."""
    return (
        "from testbed.metrics import c2st\n"
        "r = np.random.default_rng(0)\n"
        f"print(c2st(r.standard_normal(({n}, 2)), r.standard_normal(({n}, 2)) + {shift}))\n"
    )


def _fresh_process(script: str, cache: Path, *argv: str) -> subprocess.CompletedProcess:
    """`python -c script *argv` in a new process whose testbed cache folder is `cache` (and
    no JAX cache folder of the user's)."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["TESTBED_JAX_CACHE"] = str(cache)
    return subprocess.run(
        [sys.executable, "-c", script, *argv], env=env, capture_output=True, text=True
    )


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_a_second_process_neither_compiles_nor_traces_the_classifier(tmp_path):
    """End to end, as a script meets it: the first process compiles C2ST's classifier into
    testbed's default cache (no setting needed), the second loads it."""
    script = (
        "import logging, numpy as np, jax\njax.config.update('jax_log_compiles', True)\n"
    ) + _c2st_lines(60, 1)
    runs = [_fresh_process(script, tmp_path) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout  # the same accuracy
    assert "_train_epoch" in runs[0].stderr  # compiled (and traced) in the first
    assert "_train_epoch" not in runs[1].stderr  # neither in the second
    assert list((tmp_path / "testbed-programs").glob("mlp_epoch-*.bin"))


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_a_program_jax_loaded_from_its_cache_is_never_stored_broken(tmp_path):
    """An executable JAX loaded from its persistent cache serializes without its kernels
    (run, it fails with "Function ... not found"). It happens when testbed's code changes
    but the program does not (a new version, an edited comment): the stored program is
    missed, JAX's cache is hit. Such a copy is checked and not kept, so the next process
    runs (measured: before the check, the third run below failed)."""
    script = (
        "import sys, numpy as np\n"
        "import testbed.compilation_cache as cc\n"
        "if sys.argv[1] == 'edited':\n"
        "    cc.StoredPrograms._source_hash = property(lambda self: 'edited source')\n"
    ) + _c2st_lines(300, 0.5)
    runs, stored = [], []
    for version in ("original", "edited", "edited"):
        runs.append(_fresh_process(script, tmp_path, version))
        stored.append(len(list((tmp_path / "testbed-programs").glob("mlp_epoch-*.bin"))))
    assert [r.returncode for r in runs] == [0, 0, 0], runs[-1].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout == runs[2].stdout
    assert stored == [1, 1, 1]  # the edited version's copy (from JAX's cache) was not kept


def test_a_stored_program_that_fails_is_compiled_again(tmp_path):
    """A stored file that loads but fails when run (written by an older testbed) is
    removed and the program compiled; its result is the compiled program's."""
    path = tmp_path / "p.bin"
    path.write_bytes(b"old")

    def broken(*args):
        raise RuntimeError("NOT_FOUND: Function fusion not found")

    checked = cc._Checked(broken, str(path), lambda: lambda a, b: a + b)
    assert checked(1, 2) == 3 and checked(2, 2) == 4
    assert not path.exists()
