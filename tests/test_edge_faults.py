"""The edges of the store and runner: each fault a user or a machine makes ends in one line
and an exit status, and nothing stored is lost or read only in part.

Each test reproduces a fault found by trying the command line as a new user and attacking
it as a reliability engineer would (the fault is named in its docstring), and checks the
fix. Exit statuses: 0 done, 1 jobs failed, 2 bad input, 3 the machine or a service
failed, 130 interrupted (experiments.cli).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import leaderboard_faults  # noqa: F401  (registers the lbfault problems here too)
import pytest

from experiments.cli import main
from experiments.console import EXIT_ENVIRONMENT
from generative.registry import FAMILIES, register_family
from leaderboard.execution.executors import InlineExecutor
from leaderboard.execution.jobs import Job, expand
from leaderboard.execution.results import load
from leaderboard.execution.runner import run_sweep
from leaderboard.store import ResultsStore
from leaderboard.store.salvage import salvage
from testbed.base import Data, PriorKnowledge, Quality
from testbed.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# A terminal's foreground job has SIGINT at its default; a test run started in the
# background of a non-interactive shell inherits it ignored (kept through exec): reset it.
AS_A_TERMINAL_STARTS_IT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}", **extra}


def _cli(*argv: str, timeout: float = 180, **kwargs) -> subprocess.CompletedProcess:
    """`testbed ARGV` in a process of its own (what a user's shell sees)."""
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *argv],
        cwd=ROOT,
        env=kwargs.pop("env", _env()),
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def _one_line(text: str, match: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("testbed: error: "), text
    assert match in lines[0], lines[0]
    return lines[0]


def _one_line_error(capsys, match: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return _one_line(err, match)


def _record(store: ResultsStore, i: int, **metrics: float) -> None:
    job = Job.make("uniform", {"i": i}, f"coin/{i % 18}").as_dict()
    metrics = metrics or {"kl_estimate": 0.1 + i / 1000}
    store.record({**job, "status": "ok", "metrics": metrics, "traceback": "t" * 300})


# ------------------------------------------------------------------ an agent that exits

EXITING_AGENTS = """
import dataclasses, sys
import agents


@dataclasses.dataclass(frozen=True)
class Config:
    seed: int = 0


if "exits_with_5" not in agents.AGENTS:
    @agents.register("exits_with_5", Config)
    def make_5(config):
        def agent(data, prior):
            raise SystemExit(5)
        return agent

    @agents.register("exits_plainly", Config)
    def make_plain(config):
        def agent(data, prior):
            sys.exit()
        return agent
"""


def test_an_agent_that_exits_is_a_failed_job_and_the_inline_sweep_goes_on(tmp_path):
    """--executor inline: an agent that called sys.exit() (or raised SystemExit(5)) ended
    the sweep with the agent's status (0!), no summary, nothing stored for it, and the
    later jobs never ran."""
    module = tmp_path / "exiting_agents.py"
    module.write_text(EXITING_AGENTS)
    db = tmp_path / "r.db"
    proc = _cli(
        "sweep", "--agent", "exits_with_5,exits_plainly,uniform", "--problem", "coin/0,coin/1",
        "--executor", "inline", "--import", str(module), "--results", str(db), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "6 jobs: 0 already stored, 2 ok, 4 failed" in proc.stdout
    rows = load(db)
    failed = rows[rows["status"] == "failed"]
    assert set(failed["agent"]) == {"exits_with_5", "exits_plainly"} and len(failed) == 4
    assert all(e.startswith("SystemExit: the job called sys.exit(") for e in failed["error"])
    assert all("SystemExit" in t and "exiting_agents.py" in t for t in failed["traceback"])
    assert (failed["wall_seconds"] >= 0).all()
    assert (rows.loc[rows["agent"] == "uniform", "status"] == "ok").all()


# ----------------------------------------------------- Ctrl-C while workers still import

SLOW_IMPORT_DRIVER = """
import os, sys, time

if __name__ == "__mp_main__":  # a worker importing the driver's script (spawn), slowly
    open(os.environ["WORKER_IMPORTING"], "a").close()
    time.sleep(60)

if __name__ == "__main__":
    from experiments.cli import main

    sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # end to end through fresh processes (9 s); CI runs it
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Popen fork+exec: no JAX in it
def test_ctrl_c_while_workers_import_is_one_line(tmp_path):
    """Ctrl-C in the first seconds of a sweep, while its workers import, printed 7-45 lines
    of a worker's KeyboardInterrupt traceback before `testbed: interrupted`."""
    driver = tmp_path / "slow_driver.py"
    driver.write_text(SLOW_IMPORT_DRIVER)
    importing = tmp_path / "importing"
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_A_TERMINAL_STARTS_IT, str(driver), "sweep", "--agent",
         "uniform", "--problem", "coin/0,coin/1", "--workers", "2", "--results",
         str(tmp_path / "r.db"), "--quiet"],
        cwd=ROOT, env=_env(WORKER_IMPORTING=str(importing)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not importing.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # both workers inside their import
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err.strip(), out) == (130, "testbed: interrupted", ""), err


# ------------------------------------------------------------------- damaged results files


def _full_store(path: Path, rows: int = 300) -> Path:
    with ResultsStore(path) as s:
        for i in range(rows):
            _record(s, i)
    return path


def test_salvage_reads_a_store_cut_short(tmp_path, capsys):
    """`testbed salvage` on a store truncated to half its size recovered 0 rows ("10000
    unreadable", its probe count) and left an empty output file; the same bytes padded
    back with zeros gave rows."""
    data = _full_store(tmp_path / "r.db").read_bytes()
    half = tmp_path / "half.db"
    half.write_bytes(data[: len(data) // 2])
    padded = tmp_path / "padded.db"
    padded.write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))
    counts = {}
    for name, path in (("half", half), ("padded", padded)):
        out = tmp_path / f"{name}.out.db"
        assert main(["salvage", "--results", str(path), "--out", str(out)]) == 0
        out = capsys.readouterr().out
        counts[name] = (int(out.split()[1]), int(out.split("(")[1].split()[0]))
    copied, lost = counts["half"]
    assert counts["half"] == counts["padded"] and copied >= 100 and copied + lost == 300
    with ResultsStore(tmp_path / "half.out.db", mode="r") as s:
        assert len(s.rows()) == copied
    stub = tmp_path / "stub.db"  # the first page only: no row at all
    stub.write_bytes(data[:4096])
    out = tmp_path / "stub.out.db"
    assert main(["salvage", "--results", str(stub), "--out", str(out)]) == 2
    _one_line_error(capsys, "was not written")
    assert not out.exists()  # no empty results file left behind


def _store_with_rows_in_its_wal(folder: Path, rows: int = 127) -> Path:
    """A copy of a results file whose rows are all still in its WAL (its writer was open)."""
    db = folder / "live.db"
    store = ResultsStore(db)
    for i in range(rows):
        _record(store, i)
    copy = folder / "copy.db"
    shutil.copyfile(db, copy)
    shutil.copyfile(db.with_name("live.db-wal"), copy.with_name("copy.db-wal"))
    store.close()
    return copy


def test_damage_in_the_wal_is_refused_and_salvaged_never_read_in_part(tmp_path):
    """100 random bytes in the WAL: 65 of 127 rows read silently (SQLite drops every frame
    after a bad checksum). Now the store is refused as damaged (before a write could
    overwrite those frames) and salvage reads every transaction of the log."""
    good = _store_with_rows_in_its_wal(tmp_path)
    size = good.with_name("copy.db-wal").stat().st_size
    rng = random.Random(0)
    offsets = [0, 40, *sorted(rng.randrange(100, size - 100) for _ in range(6))]
    refused = 0
    for n, offset in enumerate(offsets):
        db = tmp_path / f"hit{n}.db"
        shutil.copyfile(good, db)
        wal = db.with_name(db.name + "-wal")
        shutil.copyfile(good.with_name("copy.db-wal"), wal)
        with open(wal, "r+b") as f:
            f.seek(offset)
            f.write(bytes(rng.randrange(256) for _ in range(100)))
        try:
            with ResultsStore(db, mode="r") as s:
                assert len(s.rows()) == 127, offset  # all of it, or refused: never a part
            continue
        except InputError as e:
            assert "is damaged" in str(e) and "testbed salvage" in str(e), str(e)
        refused += 1
        with pytest.raises(InputError, match="is damaged"):  # a sweep would overwrite the log
            ResultsStore(db, mode="w")
        copied, lost = salvage(db, tmp_path / f"hit{n}.out.db")
        assert copied >= 120 and copied + lost == 127, (offset, copied, lost)
    assert refused >= 6  # hits on frames that still count are found


def test_a_finished_sweep_leaves_its_rows_in_the_main_file(tmp_path, capsys):
    """A finished sweep left its rows in the WAL (while another program had the file open,
    e.g. a SQL browser): the main file alone held none of them."""
    db = tmp_path / "r.db"
    ResultsStore(db).close()
    reader = sqlite3.connect(db)  # someone looking at the results meanwhile
    reader.execute("SELECT COUNT(*) FROM results").fetchone()
    try:
        argv = ["sweep", "--agent", "uniform", "--problem", "coin/0,coin/1,coin/2",
                "--executor", "inline", "--results", str(db), "--quiet"]  # fmt: skip
        assert main(argv) == 0
        capsys.readouterr()
        alone = tmp_path / "alone.db"  # the main file without its WAL
        shutil.copyfile(db, alone)
        with sqlite3.connect(alone) as conn:
            assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 3
        conn.close()
        wal = db.with_name("r.db-wal")
        assert not wal.exists() or wal.stat().st_size == 0  # checkpointed, then emptied
    finally:
        reader.close()


# ------------------------------------------------------------------ bad paths and values


def test_paths_longer_than_the_file_system_allows_are_one_line(tmp_path, capsys):
    """A path over 255 bytes (--results, --out, --export, salvage --out) gave an OSError
    traceback and exit 1."""
    stores = _full_store(tmp_path / "r.db", rows=3)
    long = str(tmp_path / ("x" * 300))
    for argv, field in (
        (["leaderboard", "--results", long + ".db"], "results: got"),
        ([*"sweep --agent uniform --problem coin/0 --results".split(), long + ".db"], "results"),
        (["report", "--results", str(stores), "--out", long + ".html"], "out: got"),
        (["leaderboard", "--results", str(stores), "--export", long + ".csv"], "export: got"),
        (["salvage", "--results", str(stores), "--out", long + ".db"], "out: got"),
        (["leaderboard", "--results", str(tmp_path / ("y" * 260) / "z" / "r.db")], "results"),
    ):
        assert main(argv) == 2, argv
        line = _one_line_error(capsys, field)
        assert "allowed: names of at most 255 bytes" in line or "a path of" in line
    deep = "/".join(["d" * 200] * 25)  # every name allowed, the whole path too long
    assert main(["leaderboard", "--results", str(tmp_path / deep)]) == 2
    _one_line_error(capsys, "bytes (the system's limit)")


def test_seeds_running_backwards_or_by_the_million_are_refused(tmp_path, capsys):
    """`--seeds 0,5-2,1` silently dropped the backwards range (`--seeds 3-1` alone was
    refused); `--seeds 0-10000000` printed nothing and grew to 3 GB."""
    argv = ["sweep", "--agent", "uniform", "--problem", "coin/0", "--executor", "inline",
            "--results", str(tmp_path / "r.db")]  # fmt: skip
    assert main([*argv, "--seeds", "0,5-2,1"]) == 2
    _one_line_error(capsys, "--seeds: got '0,5-2,1', whose range '5-2' runs backwards")
    start = time.monotonic()
    assert main([*argv, "--seeds", "0-10000000"]) == 2
    _one_line_error(capsys, "sweep: got 10,000,001 jobs")
    assert time.monotonic() - start < 30
    assert not (tmp_path / "r.db").exists()


def test_an_unreachable_ray_cluster_is_one_line_and_leaves_no_file(tmp_path):
    """An unreachable `--executor ray --address` printed ~22 lines of Ray's log (or
    retried for minutes) and left an empty results file."""
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = tmp_path / "r.db"
    proc = _cli("sweep", "--agent", "uniform", "--problem", "coin/0", "--executor", "ray",
                "--address", f"127.0.0.1:{port}", "--results", str(db), timeout=120)  # fmt: skip
    assert proc.returncode == EXIT_ENVIRONMENT, proc.stderr
    _one_line(proc.stderr, f"cannot reach the Ray cluster at '127.0.0.1:{port}'")
    assert not db.exists()
    # the same address from Ray's own variable, no --address: named as the user set it
    proc = _cli("sweep", "--agent", "uniform", "--problem", "coin/0", "--executor", "ray",
                "--results", str(db), timeout=120,
                env={**_env(), "RAY_ADDRESS": f"127.0.0.1:{port}"})  # fmt: skip
    assert proc.returncode == EXIT_ENVIRONMENT, proc.stderr
    line = _one_line(proc.stderr, f"cannot reach the Ray cluster at '127.0.0.1:{port}'")
    assert line.startswith("testbed: error: RAY_ADDRESS: "), line
    assert not db.exists()


# Runs the command with files limited to LIMIT bytes: writing past it fails with EFBIG,
# as writing to a full disk fails with ENOSPC (no root, no small file system needed).
WITH_FILES_UP_TO = (
    "import os, resource, sys; limit = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)


def test_a_full_disk_is_the_machines_fault_not_bad_input(tmp_path):
    """A full disk exited 2, the status the README reserves for bad input. (Files may not
    grow past 64 KB here: SQLite then gets EFBIG, as it gets ENOSPC on a full disk.)"""
    db = tmp_path / "r.db"
    ids = ",".join(f"lbfault/clock-{i}" for i in range(60))
    proc = subprocess.run(
        [sys.executable, "-c", WITH_FILES_UP_TO, str(64 * 1024), "-m", "experiments.cli",
         "sweep", "--agent", "uniform", "--problem", ids, "--executor", "inline", "--import",
         "leaderboard_faults", "--results", str(db), "--quiet"],
        cwd=ROOT, env=_env(LBFAULT_SLEEP="0"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == EXIT_ENVIRONMENT, proc.stderr
    _one_line(proc.stderr, f"results: cannot write {str(db)!r}")
    with ResultsStore(db, mode="r") as s:  # what was committed before is there
        assert all(r["status"] == "ok" for r in s.rows())


# ------------------------------------------------------------- results any SQL tool reads


def test_every_stored_metric_reads_with_json_extract(tmp_path, capsys):
    """Stored metrics held `Infinity` (20 of 140 rows of a plain sweep), which is not JSON:
    sqlite3's json_extract (so DuckDB, Datasette, any SQL user) failed on them."""
    db = tmp_path / "r.db"
    argv = ["sweep", "--agent", "uniform", "--problem",
            "coin/0,lbfault/infstd,lbfault/infkl,lbfault/nan", "--executor", "inline",
            "--import", "leaderboard_faults", "--results", str(db), "--quiet"]  # fmt: skip
    assert main(argv) == 1  # infkl and nan fail (their metrics are kept)
    capsys.readouterr()
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT key, metrics FROM results").fetchall()
        assert len(rows) == 4 and all(conn.execute("SELECT json_valid(metrics) FROM results"))
        seen = set()
        for key, text in rows:
            for name, value in json.loads(text).items():
                got = conn.execute(
                    "SELECT json_extract(metrics, ?) FROM results WHERE key = ?",
                    (f'$."{name}"', key),
                ).fetchone()[0]
                if value is None:  # NaN is null: no number
                    assert got is None
                    seen.add("nan")
                else:
                    assert got == value, (name, got, value)
                    seen.update({"inf"} if math.isinf(value) else set())
        assert seen == {"nan", "inf"}
    finally:
        conn.close()
    frame = load(db).set_index("problem_id")  # and back as floats
    assert frame.loc["lbfault/infstd", "kl_estimate_std"] == math.inf
    assert frame.loc["lbfault/infkl", "kl_estimate"] == math.inf
    assert math.isnan(frame.loc["lbfault/nan", "kl_estimate"])


def test_rows_of_earlier_versions_are_rewritten_as_strict_json(tmp_path):
    db = tmp_path / "r.db"
    with ResultsStore(db) as s:
        _record(s, 0, kl_estimate=0.5)
        s._conn.execute("UPDATE results SET metrics = ?", ('{"a": Infinity, "b": NaN, "c": 1}',))
    with ResultsStore(db) as s:  # a driver opens it
        (text,) = s._conn.execute("SELECT metrics FROM results").fetchone()
        assert json.loads(text) == {"a": math.inf, "b": None, "c": 1.0}
        metrics = s.rows()[0]["metrics"]
    assert metrics["a"] == math.inf and math.isnan(metrics["b"]) and metrics["c"] == 1.0


# --------------------------------------------------------- an agent that returns no sampler

NO_SAMPLER_AGENTS = """
import dataclasses
import agents


@dataclasses.dataclass(frozen=True)
class Config:
    seed: int = 0


class Model:  # a fitted model object without __call__
    pass


if "returns_a_dict" not in agents.AGENTS:
    @agents.register("returns_a_dict", Config)
    def make_dict(config):
        return lambda data, prior: {"logits": [0.0, 0.0]}

    @agents.register("returns_a_model", Config)
    def make_model(config):
        return lambda data, prior: Model()
"""


def test_a_predictive_that_cannot_be_called_is_one_line(tmp_path, capsys):
    """An agent whose predictive is a dict or a non-callable object got a 50-line
    `TypeError: 'dict' object is not callable` traceback from deep in the estimator."""
    module = tmp_path / "no_sampler_agents.py"
    module.write_text(NO_SAMPLER_AGENTS)
    for agent, problem, got in (
        ("returns_a_dict", "coin/0", "predictive: got a dict (keys: logits)"),
        ("returns_a_model", "classification_2d_test/0", "predictive: got a Model"),
    ):
        argv = ["run", "--agent", agent, "--problem", problem, "--import", str(module)]
        assert main(argv) == 2
        _one_line_error(capsys, f"{got}, which cannot be called; allowed: an epistemic sampler")


# ---------------------------------------------------------------- names and problem options


@pytest.mark.parametrize(
    "argv, hint",
    [
        ("run --agent ensembel --problem coin/0", "(did you mean 'ensemble'"),
        ("run --agent MLP --problem coin/0", "(did you mean 'mlp'?)"),
        ("run --agent uniform --problem clasification_2d/0", "(did you mean 'classification_2d'"),
        ("run --agent uniform --problem real/irs/1/1", "(did you mean 'iris'"),
        ("sweep --agent uniform --sweep coinn", "(did you mean 'coin'?)"),
        (
            "run --agent uniform --problem real/iris/1/1 --option standardise=feature",
            "(did you mean 'standardize'?)",
        ),
    ],
)
def test_unknown_names_suggest_the_closest(argv, hint, capsys):
    """A typo listed all 28 agents but suggested none."""
    assert main(argv.split()) == 2
    _one_line_error(capsys, hint)


def test_problem_options_on_the_command_line(tmp_path, capsys, monkeypatch):
    """No problem option could be set from the command line (`--set standardize=feature`
    was refused as an agent setting): `--option KEY=VALUE`, checked as
    `generative.load(id, **options)` checks them."""
    argv = ["run", "--agent", "uniform", "--problem", "real/iris/1/1", "--json"]
    assert main([*argv, "--option", "num_test_seeds=50", "--option", "standardize=feature"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["options"] == {"num_test_seeds": 50, "standardize": "feature"}  # typed
    sweep = ["sweep", "--agent", "uniform", "--problem", "real/iris/1/1,coin/0", "--executor",
             "inline", "--results", str(tmp_path / "r.db")]  # fmt: skip
    where = "--option for real problems: "
    for bad, said in (
        ("standardize=row", "standardize: got 'row'; allowed: one of: example, feature, auto"),
        ("num_test_seeds=0", "num_test_seeds: got 0"),
        ("num_test_seeds=many", "num_test_seeds: got 'many'; allowed: an integer"),
        ("nosuch=1", "got 'nosuch'; allowed: one of: "),
    ):  # run and sweep say it alike
        assert main([*argv, "--option", bad]) == 2
        _one_line_error(capsys, where + said)
        assert main([*sweep[:4], "real/iris/1/1", *sweep[5:], "--option", bad]) == 2
        _one_line_error(capsys, where + said)
    assert main([*argv, "--option", "standardize"]) == 2
    _one_line_error(capsys, "--option: got 'standardize'; allowed: key=value")
    assert main([*sweep, "--option", "num_test_seeds=50"]) == 2  # coin takes none
    _one_line_error(capsys, "--option: got 'num_test_seeds' for coin/0; allowed: none")
    assert not (tmp_path / "r.db").exists()

    import leaderboard.execution.jobs

    got = {}

    def expand(*args, problem_options=None, **kwargs):  # the keyword jobs.expand takes
        got.update(problem_options)
        return []

    monkeypatch.setattr(leaderboard.execution.jobs, "expand", expand)
    sweep = [*sweep[:4], "real/iris/1/1,real/wine/1/1", *sweep[5:]]
    assert main([*sweep, "--option", "num_test_seeds=50", "--quiet"]) == 0
    assert got == {"num_test_seeds": 50}  # typed, as the problems take it


# ------------------------------------------------------- progress of an interrupted job


class _AbandonedActivity:
    """A problem whose scoring opens a progress activity and is stopped inside it before
    the activity's cleanup runs (as when the time limit's alarm lands in that cleanup)."""

    train_data = Data(x=[[0.0]], y=[0])
    prior_knowledge = PriorKnowledge(input_dim=1, num_train=1, num_classes=2)

    opened: list = []  # held, as an activity whose cleanup was cut off is never closed

    def evaluate(self, predictive) -> Quality:
        from testbed import progress

        activity = progress.activity("npe on sbi/two_moons/1000/1 (one training for 2)")
        activity.__enter__()
        self.opened.append(activity)
        time.sleep(60)  # the time limit stops the job here
        return Quality(kl_estimate=0.0)


if "edge_abandoned" not in FAMILIES:
    register_family("edge_abandoned", lambda rest: {"i": rest}, "tests only")(
        lambda settings: _AbandonedActivity()
    )


def test_a_job_stopped_inside_an_activity_leaves_no_progress_line_behind(tmp_path):
    """sbi's progress line leaked into pytest's output: after the inline timeout test, an
    sbi training's activity stayed open, and every later progress line of the process
    carried its label ('npe on sbi/two_moons/1000/1 (one training for 2) · ...')."""
    from testbed import progress

    with ResultsStore(tmp_path / "r.db") as s:
        summary = run_sweep(
            expand(["uniform"], ["edge_abandoned/0"]), s, InlineExecutor(timeout=0.5)
        )
    assert summary.failed == 1 and "timed out" in summary.failures[0][1]
    assert not any("one training for 2" in a.text() for a in progress._stack)


# ------------------------------------------------------------------------ fault injection


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Popen fork+exec: no JAX in it
def test_fault_injection_loses_and_doubles_no_row(tmp_path):
    """tests/fault_injection.py: kills, Ctrl-C, concurrent sweeps, corrupt rows, a damaged
    WAL and a truncated store, each on a scratch store: rows lost and doubled (0, 0); a
    training group killed between its rows; malformed command lines, each one line with
    status 2. (The Ray cluster's faults, its --ray, are test_ray_faults.py's slow tests,
    run by this tier themselves.)"""
    proc = subprocess.run(
        [sys.executable, str(TESTS / "fault_injection.py"), "--folder", str(tmp_path / "f"),
         "--jobs", "12"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith(
        "all probes: rows lost 0, doubled 0, faults not in one line with their status 0"
    ), proc.stdout
    assert "malformed command lines, each one line with status 2: rows lost 0" in proc.stdout
    assert "a training group killed between its rows, then resume: rows lost 0" in proc.stdout
