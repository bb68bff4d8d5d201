"""Ctrl-C stops every command promptly: one line `<prog>: interrupted`, status 130.

Each command is started as a terminal starts a foreground job (in a session of its own,
SIGINT at its default), is seen inside its work (a progress line on stderr, or its file
descriptor 2 held by a PPL's `quiet()` while it compiles or samples), and gets SIGINT
on its whole process group, as a terminal's Ctrl-C sends it. It must end within
`STOP_WITHIN` seconds. Each is sized so that its work would last minutes more: before the
fixes of this file's commands, PyMC's second chain ran to its end (206 s), nutpie's
partial draws were scored ("draws: got NaN"), PyStan returned None (an AttributeError
traceback, then the process waited minutes for httpstan's chains), a JAX agent's wait
for its one computation held Ctrl-C back until it returned (an ensemble's training: still
running 120 s after it), and an interrupted process waited at its exit for the
computation the interrupt left running (blackjax: 55 s).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# A terminal's foreground job has SIGINT at its default; a test run started in the
# background of a non-interactive shell inherits it ignored (kept through exec): reset it.
AS_A_TERMINAL_STARTS_IT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)
# A few seconds on an idle machine (the interrupt is raised at once, stores are closed and
# workers stopped in `finally` blocks); three times that on a loaded 2-core machine, and
# still far below the minutes the interrupted work would go on for.
STOP_WITHIN = 15.0
READY_WITHIN = 600.0  # to reach its work: imports, a PPL's first compilation (httpstan: ~2 min)
PROGRESS = re.compile(r"^testbed: \d\d:\d\d:\d\d ")  # a heartbeat: work has run for 10 s


def _progress(lines: list[str], pid: int) -> bool:
    return any(PROGRESS.match(line) for line in lines)


def _epochs(lines: list[str], pid: int) -> bool:
    """An sbi agent inside its training: it says its epochs ('round 1/1, epoch 12, ...')."""
    return any(PROGRESS.match(line) and ", epoch " in line for line in lines)


def _sampling(lines: list[str], pid: int) -> bool:
    """A PPL agent inside its work: its stderr (fd 2) points at `quiet()`'s temporary file
    (deleted), not at our pipe."""
    try:
        return os.readlink(f"/proc/{pid}/fd/2").endswith("(deleted)")
    except OSError:
        return False


def interrupt(
    argv: list[str], ready: Callable[[list[str], int], bool], cwd: Path, settle: float = 3.0
) -> tuple[float, int, list[str]]:
    """Starts `python ARGV` as a terminal does, waits until `ready(stderr lines, pid)` and
    `settle` seconds more, sends SIGINT to its process group; (seconds from the signal to
    its exit, its status, its stderr lines after the signal)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TESTBED_PROGRESS": "lines"}
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_A_TERMINAL_STARTS_IT, *argv],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + READY_WITHIN
        while not ready(lines, proc.pid) and proc.poll() is None:
            assert time.monotonic() < deadline, f"not inside its work: {lines[-5:]}"
            time.sleep(0.1)
        time.sleep(settle)
        assert proc.poll() is None, f"ended before Ctrl-C ({proc.returncode}): {lines[-20:]}"
        before = len(lines)
        os.killpg(proc.pid, signal.SIGINT)
        sent = time.monotonic()
        try:
            status = proc.wait(timeout=STOP_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {STOP_WITHIN:g} s after Ctrl-C: {lines[-5:]}")
        seconds = time.monotonic() - sent
        reader.join(timeout=STOP_WITHIN)  # EOF: no process of the group holds stderr
        assert not reader.is_alive(), "a process of the command outlived it (stderr open)"
        return seconds, status, [line.rstrip("\n") for line in lines[before:]]
    finally:
        if proc.poll() is None:  # the test failed: leave no process behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _check(prog: str, outcome: tuple[float, int, list[str]]) -> None:
    seconds, status, after = outcome
    # a heartbeat may be on its way when the signal lands; nothing else may follow it
    said = [line for line in after if not PROGRESS.match(line)]
    assert (status, said) == (130, [f"{prog}: interrupted"]), after
    assert seconds < STOP_WITHIN


RUN = ["-m", "experiments.cli", "run"]
WYB = "conjugate/wyb/21"


@pytest.mark.slow
@pytest.mark.parametrize(
    "agent, module, samples",
    [
        ("stan", "stan", 200_000),  # PyStan returned None; httpstan's chains ran on
        ("pymc", "pymc", 200_000),  # PyMC ended the chain, then sampled the next
        ("nutpie", "nutpie", 400_000),  # nutpie returned the draws so far
        ("pyro", "pyro", 200_000),
    ],
)
def test_ctrl_c_while_a_ppl_samples(agent, module, samples, tmp_path):
    """Its model compiled by a run before (on a fresh machine the signal would land in the
    compile, which `test_ctrl_c_while_a_ppl_compiles` covers), so Ctrl-C lands in sampling."""
    pytest.importorskip(module)
    if agent != "pyro":
        warm = [*RUN, "--agent", agent, "--problem", WYB, "--set", "num_samples=100"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, *warm], cwd=tmp_path, env=env, text=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        assert done.returncode == 0, f"the compiling run failed: {done.stderr[-2000:]}"
    argv = [*RUN, "--agent", agent, "--problem", WYB, "--set", f"num_samples={samples}"]
    ready = _progress if agent == "pyro" else _sampling  # pyro prints its own progress
    _check("testbed", interrupt(argv, ready, tmp_path, settle=10.0))


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["blackjax", "numpyro"])
def test_ctrl_c_while_a_jax_ppl_samples(agent, tmp_path):
    """One XLA computation samples every draw: Ctrl-C waited for it."""
    pytest.importorskip(agent)
    pytest.importorskip("arviz")  # the PPL agents' diagnostics (the ppl extra)
    argv = [*RUN, "--agent", agent, "--problem", WYB, "--set", "num_samples=400000"]
    _check("testbed", interrupt(argv, _progress, tmp_path))


# nutpie's compile with its native part standing for minutes: numba's LLVM passes run for
# tens of seconds in one native call (a cold compile on a loaded machine), as this does
COMPILING_FOR_MINUTES = f"""
import hashlib, sys
import agents.ppl.pymc_agent as pymc_agent
assert "compile_pymc_model" in pymc_agent._nutpie_model.__code__.co_names  # what it calls
pymc_agent.compile_pymc_model = lambda m: hashlib.pbkdf2_hmac("sha256", b"x", b"y", 10**9)
sys.argv = ["testbed", "run", "--agent", "nutpie", "--problem", "{WYB}"]
from experiments.cli import main
sys.exit(main())
"""


@pytest.mark.slow
def test_ctrl_c_while_a_ppl_compiles(tmp_path):
    """A model's compile runs in a worker thread, the main thread waiting in Python: Ctrl-C
    inside a long native call of it (CI: numba's LLVM passes, a cold cache) waited for it."""
    pytest.importorskip("nutpie")
    _check("testbed", interrupt(["-c", COMPILING_FOR_MINUTES], _sampling, tmp_path))


@pytest.mark.slow
def test_ctrl_c_while_sbi_trains(tmp_path):
    pytest.importorskip("sbi")
    argv = [*RUN, "--agent", "npe", "--problem", "sbi/two_moons/10000/1"]
    _check("testbed", interrupt(argv, _epochs, tmp_path))


ENSEMBLE = ["--agent", "ensemble", "--set", "num_batches=200000"]


@pytest.mark.slow
def test_ctrl_c_while_a_network_trains(tmp_path):
    """The training is one jitted scan: Ctrl-C waited for it (`np.asarray` of its losses)."""
    argv = [*RUN, *ENSEMBLE, "--problem", "classification_2d/0"]
    _check("testbed", interrupt(argv, _progress, tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_in_a_sweep(workers, tmp_path):
    argv = ["-m", "experiments.cli", "sweep", *ENSEMBLE, "--problem",
            "classification_2d/0,classification_2d/1", "--workers", str(workers),
            "--results", str(tmp_path / "r.db")]  # fmt: skip
    _check("testbed", interrupt(argv, _progress, tmp_path))


def _script_progress(lines: list[str], pid: int) -> bool:
    """A reproduction inside its work: a heartbeat, or a sweep's with a job in progress."""
    return any(
        PROGRESS.match(line) and ("sweep:" not in line or re.search(r"[1-9] jobs? in", line))
        for line in lines
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, options, ready",
    [
        ("ppl_power", "--problems wyb/21 --samplers nuts --measures c2st --sizes 1000 "
         "--trials 1000 --c2st-trials 200 --results {tmp}/pp.db --no-shipped", _script_progress),
        ("reproduce_wyb", "--agents pymc --problems 21 --priors matched --seeds 1 "
         "--num-samples 100000 --results {tmp}/wyb.db --out {tmp}/wyb --no-shipped", _sampling),
        ("reproduce_lc2st", "--parts level --tasks two_moons --runs 1 --results {tmp}/lc.db "
         "--out {tmp}/lc --no-shipped", _script_progress),
        ("reproduce_decisions", "--agents ensemble --seeds 1 --results {tmp}/d.db --out "
         "{tmp}/d --no-shipped", _script_progress),
        ("tune_references", "--agents ensemble --results {tmp}/t.db --out {tmp}/t.csv "
         "--no-shipped",
         _script_progress),
    ],
)  # fmt: skip
def test_ctrl_c_in_a_reproduction(script, options, ready, tmp_path):
    """Each reproduction's run mode at a small size, stopped inside its first cell or job;
    what finished before is in its store (`experiments.cells`, `leaderboard.execution.runner`)."""
    if script in ("ppl_power", "reproduce_wyb"):
        pytest.importorskip("pymc" if script == "reproduce_wyb" else "arviz")  # the ppl extra
    argv = ["-m", f"experiments.{script}", *options.format(tmp=tmp_path).split()]
    _check(script, interrupt(argv, ready, tmp_path, settle=5.0 if ready is _sampling else 3.0))
