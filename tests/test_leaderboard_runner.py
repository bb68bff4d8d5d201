"""The sweep runner with real worker processes: failures, timeouts, SIGKILL and resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import leaderboard_faults  # noqa: F401  (registers the lbfault problems here too)
import pytest

from experiments.cli import main
from leaderboard.execution import results
from leaderboard.execution.executors import InlineExecutor, LocalExecutor
from leaderboard.execution.jobs import expand
from leaderboard.execution.runner import run_sweep
from leaderboard.execution.worker import run_job
from leaderboard.store import ResultsStore
from testbed.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
FAST_IDS = [f"coin/{i}" for i in range(6)]  # uniform and oracle are fast on these
TIMING = ("train_seconds", "evaluation_seconds")


def _metrics(rows):
    """key -> metrics without timings (the only numbers allowed to differ between runs)."""
    return {
        r["key"]: {k: v for k, v in r["metrics"].items() if k not in TIMING}
        for r in rows
        if r["status"] == "ok"
    }


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_failures_are_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("TESTBED_JAX_CACHE", str(tmp_path / "jax-cache"))
    ids = [f"lbfault/{m}" for m in ("raise", "nan", "hang", "die", "env")] + ["coin/0"]
    jobs = expand(["uniform"], ids)
    # The timeout must exceed the slowest honest job (coin/0 compiles JAX: ~3 s, more on a
    # loaded machine); the hung job costs exactly this long.
    executor = LocalExecutor(workers=2, timeout=10.0, imports=("leaderboard_faults",))
    with ResultsStore(tmp_path / "r.db") as s:
        summary = run_sweep(jobs, s, executor)
        rows = {r["problem_id"]: r for r in s.rows(tracebacks=True)}
    assert (summary.ran, summary.ok, summary.failed) == (6, 2, 4)
    assert rows["lbfault/raise"]["error"] == "RuntimeError: deliberate failure second line"
    assert rows["lbfault/nan"]["error"] == "non-finite metrics: kl_estimate=nan"
    assert rows["lbfault/nan"]["metrics"]["test_acc"] == 0.5  # kept for scoring
    assert rows["lbfault/hang"]["error"] == "timed out after 10 s (worker killed)"
    assert rows["lbfault/die"]["error"] == "worker process died (exit code 7)"
    # their wall time and, as traceback, where the hung job was (the worker's stack when
    # its time ran out) or why a dead worker left none (rows had neither)
    hang, die = rows["lbfault/hang"], rows["lbfault/die"]
    assert 10 <= hang["wall_seconds"] < 60 and 0 <= die["wall_seconds"] < 60
    assert "time limit ran out" in hang["traceback"]
    assert "leaderboard_faults.py" in hang["traceback"] and "in evaluate" in hang["traceback"]
    assert "No Python traceback" in die["traceback"] and "exited with code 7" in die["traceback"]
    assert rows["coin/0"]["status"] == "ok" and rows["coin/0"]["metrics"]["kl_estimate"] > 0
    # each worker runs with one thread for XLA and OpenMP, set before its imports
    env = rows["lbfault/env"]["metrics"]
    assert (env["omp_threads"], env["xla_one_thread"], env["eigen_off"]) == (1.0, 1.0, 1.0)
    assert env["jax_cache_set"] == 1.0  # the persistent compilation cache of TESTBED_JAX_CACHE
    # started with SIGINT blocked (a Ctrl-C while it imports waits), a worker ignores it
    # and unblocks it: the driver alone answers Ctrl-C
    assert (env["sigint_ignored"], env["sigint_blocked"]) == (1.0, 0.0)


def _sweep_cmd(db: Path) -> list[str]:
    return [
        sys.executable, "-m", "experiments.cli", "sweep", "--agent", "uniform,oracle",
        "--problem", ",".join(FAST_IDS), "--workers", "2", "--results", str(db), "--quiet",
    ]  # fmt: skip


def _children(pid: int) -> list[int]:
    """Process ids whose parent is `pid` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _rows_in(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Popen fork+exec: no JAX in it
def test_sigkill_mid_sweep_then_resume_is_exactly_once_and_identical(tmp_path, capsys):
    db = tmp_path / "r.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(_sweep_cmd(db), cwd=ROOT, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _rows_in(db) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = _children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Orphaned workers notice their driver is gone and exit (none keeps running a job).
    gone_by = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < gone_by:
        time.sleep(0.1)
    assert workers and not any(_alive(p) for p in workers)
    assert proc.returncode == -signal.SIGKILL
    stored = _rows_in(db)
    total = 2 * len(FAST_IDS)
    assert 2 <= stored < total, "the kill must land in the middle of the sweep"

    assert main(_sweep_cmd(db)[3:]) == 0  # start it again (a new driver, in this process)
    out = capsys.readouterr().out
    assert f"{total} jobs: {stored} already stored, {total - stored} ok, 0 failed" in out

    with ResultsStore(db, mode="r") as s:
        rows = s.rows()
    jobs = expand(["uniform", "oracle"], FAST_IDS)
    assert sorted(r["key"] for r in rows) == sorted(j.key for j in jobs)  # none lost or doubled
    assert all(r["attempts"] == 1 and r["status"] == "ok" for r in rows)
    # An uninterrupted run with the same seeds (in this process) gives identical numbers.
    reference = [run_job(j).row() for j in jobs]
    assert _metrics(rows) == _metrics(reference)


def test_retry_failed_reruns_only_failures(tmp_path):
    db = tmp_path / "r.db"
    jobs = expand(["uniform"], ["coin/0", "lbfault/raise"])
    executor = InlineExecutor(imports=("leaderboard_faults",))
    with ResultsStore(db) as s:
        first = run_sweep(jobs, s, executor)
        again = run_sweep(jobs, s, executor)
        retry = run_sweep(jobs, s, executor, retry_failed=True)
    assert (first.ok, first.failed) == (1, 1)
    assert (again.skipped, again.ran) == (2, 0)
    assert (retry.skipped, retry.ran, retry.failed) == (1, 1, 1)
    df = results.load(db).set_index("problem_id")
    assert df.loc["lbfault/raise", "attempts"] == 2 and df.loc["coin/0", "attempts"] == 1


def test_infinite_score_fails_but_infinite_diagnostic_does_not(tmp_path):
    jobs = expand(["uniform"], ["lbfault/infstd", "lbfault/infkl"])
    with ResultsStore(tmp_path / "r.db") as s:
        run_sweep(jobs, s, InlineExecutor())
        rows = {r["problem_id"]: r for r in s.rows()}
    assert rows["lbfault/infstd"]["status"] == "ok"
    assert rows["lbfault/infstd"]["metrics"]["kl_estimate_std"] == float("inf")
    assert rows["lbfault/infkl"]["error"] == "non-finite metrics: kl_estimate=inf"


@pytest.mark.slow
def test_cli_sweep_with_seeds_then_resume_skips_all(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    argv = ["sweep", "--agent", "knn", "--sweep", "coin", "--seeds", "0,1", "--quiet"]
    assert main(argv + ["--results", db]) == 0
    assert "36 jobs: 0 already stored, 36 ok, 0 failed" in capsys.readouterr().out
    assert main(argv + ["--results", db]) == 0
    assert "36 jobs: 36 already stored, 0 ok" in capsys.readouterr().out


def test_set_with_configs_sweep_applies_to_every_config_of_the_sweep(caplog):
    import agents
    from leaderboard.execution.jobs import agent_configs

    sweep = [a.config_dict() for a in agents.sweep("mlp")]
    configs = agent_configs("mlp", {"num_batches": "500"}, configs="sweep")
    assert all(c["num_batches"] == 500 for c in configs)
    want = {json.dumps({**c, "num_batches": 500}, sort_keys=True) for c in sweep}
    assert len(configs) == len(want) < len(sweep)  # configs the override makes alike: once
    assert {json.dumps(c, sort_keys=True) for c in configs} == want
    said = f"the {len(sweep)} configs of mlp's sweep are {len(want)} distinct after --set "
    assert said + "num_batches=500" in caplog.text
    caplog.clear()
    configs = agent_configs("mlp", {"learning_rate": 0.01}, configs="sweep")
    distinct = {json.dumps(c, sort_keys=True) for c in sweep}  # the reference lists one twice
    assert len(configs) == len(distinct) and {c["learning_rate"] for c in configs} == {0.01}
    assert "distinct" not in caplog.text
    # the default config takes the override as before; a bad value names the field
    assert agent_configs("mlp", {"num_batches": 500}) == [
        agents.load("mlp", num_batches=500).config_dict()
    ]
    with pytest.raises(InputError, match="^agent mlp: num_batches: got 'x'"):
        agent_configs("mlp", {"num_batches": "x"}, configs="sweep")


def test_cli_sweep_set_and_configs_sweep_expand_every_config(monkeypatch, capsys, tmp_path):
    import agents
    from leaderboard.execution import runner

    ran = []

    def fake_run_sweep(jobs, store, executor, **kwargs):
        ran.extend(jobs)
        raise KeyboardInterrupt  # stop before anything runs

    monkeypatch.setattr(runner, "run_sweep", fake_run_sweep)
    argv = ["sweep", "--agent", "uniform,mlp", "--configs", "sweep", "--set", "num_batches=500"]
    argv += ["--problem", "classification_2d_test/0", "--executor", "inline", "--quiet"]
    assert main(argv + ["--results", str(tmp_path / "r.db")]) == 130
    mlp = [j for j in ran if j.agent == "mlp"]
    assert len(mlp) > 10 and {j.config["num_batches"] for j in mlp} == {500}
    assert len(mlp) < len(agents.sweep("mlp")) and [j.agent for j in ran].count("uniform") == 1
    assert "distinct after --set" in capsys.readouterr().err
