"""Nothing a user types destroys results; every fault of the store or runner is one line.

Each test reproduces a way results were lost, or a fault gave a traceback, and checks
the guarantee the README's Leaderboard section states.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import leaderboard_faults  # noqa: F401  (registers the lbfault problems here too)
import pytest

from experiments.cli import main
from leaderboard.execution.executors import (
    DEFAULT_TIMEOUT,
    InlineExecutor,
    LocalConfig,
    LocalExecutor,
    RayConfig,
    check_timeout,
)
from leaderboard.execution.jobs import Job, expand
from leaderboard.execution.results import load
from leaderboard.execution.runner import run_sweep
from leaderboard.outputs import write_atomically
from leaderboard.store import CLAIMED, DONE, ResultsStore
from testbed.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def _record(store, pid, status="ok", agent="uniform", **metrics):
    job = Job.make(agent, {}, pid).as_dict()
    error = None if status == "ok" else "boom"
    store.record({**job, "status": status, "error": error, "metrics": metrics, "wall_seconds": 1})


def _store(path: Path, rows: int = 6) -> Path:
    with ResultsStore(path) as s:
        for i in range(rows):
            _record(s, f"coin/{i % 18}", agent=f"agent{i // 18}", kl_estimate=0.1 + i / 100)
            _record(s, f"coin/{i % 18}", agent=f"uniform{i // 18}", kl_estimate=0.5)
    return path


def _digest(path: Path) -> dict[str, str]:
    """Hashes of the store and its side files (those that exist)."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        f = path.with_name(path.name + suffix)
        if f.exists():
            out[suffix] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def _one_line_error(capsys, match: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("testbed: error: "), err
    assert match in lines[0], lines[0]
    assert "Traceback" not in err
    return lines[0]


# --------------------------------------------------------------------- outputs never overwrite


def test_report_and_export_onto_the_store_are_refused_and_the_store_is_unchanged(tmp_path, capsys):
    db = _store(tmp_path / "r.db")
    other = _store(tmp_path / "other.db")
    link = tmp_path / "link.html"
    link.symlink_to(db)
    before, other_before = _digest(db), _digest(other)
    r = str(db)
    attempts = [
        ["report", "--results", r, "--out", r],
        ["report", "--results", r, "--out", r + "-wal"],
        ["report", "--results", r, "--out", str(link)],
        ["report", "--results", r, "--out", str(other)],  # any SQLite file
        ["report", "--results", r, "--out", str(other) + "-shm"],
        ["leaderboard", "--results", r, "--export", r],
        ["leaderboard", "--results", r, "--export", str(other)],
    ]
    for argv in attempts:
        assert main(argv) == 2, argv
        _one_line_error(capsys, "which would overwrite results")
    assert _digest(db) == before and _digest(other) == other_before
    assert len(load(db)) == 12


def test_report_onto_the_store_from_the_console_script(tmp_path):
    db = _store(tmp_path / "r.db")
    before = _digest(db)
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "report", "--results", str(db), "--out", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "would overwrite results" in proc.stderr
    assert _digest(db) == before


def test_outputs_replace_the_old_file_atomically(tmp_path, capsys):
    out = tmp_path / "report.html"
    out.write_text("older good report")

    def crash(tmp: Path) -> None:
        tmp.write_text("half a rep")
        raise KeyboardInterrupt  # e.g. Ctrl-C while writing

    with pytest.raises(KeyboardInterrupt):
        write_atomically("out", out, crash)
    assert out.read_text() == "older good report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temporary left

    db = _store(tmp_path / "r.db")
    assert main(["report", "--results", str(db), "--out", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert main(["leaderboard", "--results", str(db), "--export", str(tmp_path / "a.csv")]) == 0
    assert len((tmp_path / "a.csv").read_text().splitlines()) == 13
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    capsys.readouterr()


# ------------------------------------------------------------------- reading every committed row


_KILLED_WRITER = """
import os, sys
from leaderboard.execution.jobs import Job
from leaderboard.store import ResultsStore
s = ResultsStore(sys.argv[1])
for i in range(25):
    job = Job.make("uniform", {}, f"coin/{i % 18}", seed=i // 18).as_dict()
    s.record({**job, "status": "ok", "metrics": {"kl_estimate": 0.5}, "wall_seconds": 1.0})
os._exit(0)  # killed: no checkpoint, the rows stay in the WAL file
"""

_READER = """
import sys
from leaderboard.store import ResultsStore
from testbed.errors import InputError
try:
    with ResultsStore(sys.argv[1], mode="r") as s:
        print(len(s.rows()))
except InputError as e:
    print("refused:", e)
"""


def _read_as_unprivileged(path: Path) -> str:
    """Runs _READER on `path` as a user that cannot write its folder."""
    cmd = [sys.executable, "-c", _READER, str(path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": "/tmp"}
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot make a folder read-only")
        user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        # the premise: that user can run this Python and import this checkout (a venv or
        # checkout under a private home is not readable by it); if not, nothing to test
        premise = [*user, sys.executable, "-c", "import leaderboard.store"]
        try:
            check = subprocess.run(premise, capture_output=True, text=True, env=env, timeout=120)
        except OSError as e:
            pytest.skip(f"the unprivileged user cannot run this Python: {e}")
        if check.returncode != 0:
            pytest.skip(f"the unprivileged user cannot run this checkout: {check.stderr[-200:]}")
        cmd = [*user, *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_read_only_store_without_its_shm_file_shows_every_committed_row(tmp_path):
    written = tmp_path / "w" / "r.db"
    written.parent.mkdir()
    subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, str(written)],
        cwd=ROOT,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert written.with_name("r.db-wal").stat().st_size > 0
    folder = Path(tempfile.mkdtemp(prefix="testbed-ro-"))  # reachable by another user
    try:
        os.chmod(folder, 0o755)
        for name in ("r.db", "r.db-wal"):  # copied without its -shm file
            shutil.copyfile(written.with_name(name), folder / name)
            os.chmod(folder / name, 0o444)
        os.chmod(folder, 0o555)
        assert _read_as_unprivileged(folder / "r.db") == "25"
        assert sorted(p.name for p in folder.iterdir()) == ["r.db", "r.db-wal"]  # untouched
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)


def test_a_foreign_sqlite_file_is_refused_before_anything_changes(tmp_path):
    path = tmp_path / "mine.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.close()
    before = _digest(path)
    with pytest.raises(InputError, match="no 'meta' table"):
        ResultsStore(path)
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.db"]  # no -wal, no -shm
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


# ----------------------------------------------------------------- faults give one line, exit 2


def test_a_damaged_store_gives_one_line_for_every_command(tmp_path, capsys):
    db = _store(tmp_path / "r.db", rows=90)
    with ResultsStore(db) as s:  # long tracebacks: the file spans many pages
        for i in range(60):
            job = Job.make("mlp", {"i": i}, "coin/0").as_dict()
            s.record({**job, "status": "failed", "error": "x", "traceback": "t" * 400})
    sqlite3.connect(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    assert db.stat().st_size > 16384
    with open(db, "r+b") as f:
        f.seek(12288)
        f.write(os.urandom(4096))
    r = str(db)
    commands = [
        ["leaderboard", "--results", r],
        ["report", "--results", r, "--out", str(tmp_path / "x.html")],
        ["sweep", "--agent", "uniform", "--problem", "coin/0", "--results", r, "--quiet"],
    ]
    for argv in commands:
        assert main(argv) == 2, argv
        _one_line_error(capsys, "is damaged")
    assert not (tmp_path / "x.html").exists()


def test_a_row_with_corrupt_metrics_is_skipped_with_a_warning_and_replaced_by_a_rerun(
    tmp_path, capsys
):
    db = tmp_path / "r.db"
    jobs = expand(["uniform"], ["coin/0", "coin/1", "coin/2"])
    with ResultsStore(db) as s:
        run_sweep(jobs, s, InlineExecutor())
    bad = jobs[1].key
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE results SET metrics = '{\"kl_estimate\": 0.3' WHERE key = ?", (bad,))
    conn.close()
    assert main(["leaderboard", "--results", str(db), "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    warning = [line for line in err.splitlines() if line]
    assert len(warning) == 1 and warning[0].startswith("testbed: warning: ")
    assert bad in warning[0] and "skipped" in warning[0]
    assert "uniform" in out
    # a re-run of the sweep runs the damaged job again and replaces its row
    assert main(["sweep", "--agent", "uniform", "--problem", "coin/0,coin/1,coin/2",
                 "--results", str(db), "--executor", "inline", "--quiet"]) == 0  # fmt: skip
    assert "3 jobs: 2 already stored, 1 ok, 0 failed" in capsys.readouterr().out
    df = load(db).set_index("key")
    assert df.loc[bad, "attempts"] == 2 and df.loc[bad, "kl_estimate"] > 0


def test_many_processes_creating_one_new_store_all_succeed(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(TESTS / "store_race.py"), str(tmp_path), "6", "10"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 60 and set(lines) == {"ok"}, sorted(set(lines))
    for i in range(10):
        with ResultsStore(tmp_path / f"r{i}.db", mode="r") as s:
            assert s.rows() == []


@pytest.mark.parametrize(
    "value, seconds",
    [("inf", None), ("none", None), ("0", None), (0, None), (None, None), ("90", 90.0),
     (2.5, 2.5), ("1e12", None)],
)  # fmt: skip
def test_timeout_values(value, seconds):
    assert check_timeout(value) == seconds


@pytest.mark.parametrize("value", ["-1", "nan", "soon", -0.5])
def test_bad_timeout_values(value):
    with pytest.raises(InputError, match="timeout: got .*allowed: seconds > 0"):
        check_timeout(value)


def test_timeout_on_the_command_line(tmp_path, capsys):
    argv = ["sweep", "--agent", "uniform", "--problem", "coin/0", "--executor", "inline",
            "--results", str(tmp_path / "r.db"), "--quiet"]  # fmt: skip
    assert main([*argv, "--timeout", "inf"]) == 0
    assert main([*argv, "--timeout", "-3"]) == 2
    _one_line_error(capsys, "timeout: got '-3'")


# ------------------------------------------------------------------------------ runner behaviour


def test_every_executor_has_a_default_timeout_and_inline_honours_it(tmp_path):
    assert LocalConfig().timeout == RayConfig().timeout == DEFAULT_TIMEOUT == 86400
    assert InlineExecutor().timeout == DEFAULT_TIMEOUT
    assert LocalExecutor().timeout == DEFAULT_TIMEOUT
    jobs = expand(["uniform"], ["lbfault/hang", "coin/0"])
    start = time.monotonic()
    with ResultsStore(tmp_path / "r.db") as s:
        summary = run_sweep(jobs, s, InlineExecutor(timeout=1.0))
        rows = {r["problem_id"]: r for r in s.rows()}
    assert time.monotonic() - start < 60
    assert (summary.ok, summary.failed) == (1, 1)
    assert rows["lbfault/hang"]["error"] == "timed out after 1 s (interrupted)"
    assert rows["coin/0"]["status"] == "ok"


def test_inline_timeout_off_the_main_thread_warns(tmp_path, caplog):
    jobs = expand(["uniform"], ["coin/0"])
    out = {}

    def sweep():
        with ResultsStore(tmp_path / "r.db") as s:
            out["summary"] = run_sweep(jobs, s, InlineExecutor(timeout=5.0))

    thread = threading.Thread(target=sweep)
    thread.start()
    thread.join(120)
    assert out["summary"].ok == 1
    assert any("only in the main thread" in r.getMessage() for r in caplog.records)


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Popen fork+exec: no JAX in it
def test_ray_honours_workers_and_keeps_json_output_clean(tmp_path):
    pytest.importorskip("ray")
    db = tmp_path / "r.db"
    ids = ",".join(f"lbfault/clock-{i}" for i in range(3))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}", "LBFAULT_SLEEP": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "sweep", "--agent", "uniform",
         "--problem", ids, "--executor", "ray", "--workers", "1", "--import",
         "leaderboard_faults", "--results", str(db), "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)  # nothing of Ray's on stdout
    assert (summary["ok"], summary["failed"]) == (3, 0)
    spans = sorted((r["started"], r["ended"]) for _, r in load(db).iterrows())
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans  # one at a time


def test_a_rerun_over_stored_failures_says_so_and_exits_1(tmp_path, capsys):
    argv = ["sweep", "--agent", "uniform", "--problem", "coin/0,lbfault/raise,lbfault/nan",
            "--executor", "inline", "--import", "leaderboard_faults",
            "--results", str(tmp_path / "r.db"), "--quiet"]  # fmt: skip
    assert main(argv) == 1
    capsys.readouterr()
    assert main(argv) == 1  # nothing ran, but the sweep is not a success
    out = capsys.readouterr().out
    assert "3 jobs: 3 already stored, 0 ok, 0 failed" in out
    assert "2 failed (stored earlier; --retry-failed re-runs them)" in out
    assert out.count("  failed ") == 2


def test_every_failure_is_counted_when_more_than_ten(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    ids = ",".join(f"lbfault/raise-{i}" for i in range(24))
    argv = ["sweep", "--agent", "uniform", "--problem", ids, "--executor", "inline",
            "--import", "leaderboard_faults", "--results", db, "--quiet"]  # fmt: skip
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert out.count("  failed ") == 10
    assert "... and 14 more failed (testbed leaderboard --failures" in out
    assert main(["leaderboard", "--failures", "--results", db, "--format", "csv"]) == 0
    listed = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))  # tracebacks: lines
    assert len(listed) == 24
    assert all("RuntimeError: deliberate failure" in r["error"] for r in listed)
    assert all("deliberate failure" in r["traceback"] for r in listed)


# ----------------------------------------------------------------------------- job leases


def test_a_claimed_job_is_not_claimed_again_until_it_is_stored_or_its_owner_is_gone(tmp_path):
    path = tmp_path / "r.db"
    job = Job.make("uniform", {}, "coin/0").as_dict()
    with ResultsStore(path) as a, ResultsStore(path) as b:
        assert a.claim(job["key"], seconds=60) == CLAIMED
        assert a.claim(job["key"], seconds=60) == CLAIMED  # its own lease: still its own
        holder = b.claim(job["key"], seconds=60)
        assert holder.startswith(f"pid {os.getpid()} on {a.owner.host}, its lease ends 20")
        a.record({**job, "status": "failed", "error": "x", "metrics": {}})
        assert b.claim(job["key"], seconds=60) == DONE  # stored failed, not retrying
        assert b.claim(job["key"], rerun_failed=0, seconds=60) == DONE  # run by someone since
        assert b.claim(job["key"], rerun_failed=1, seconds=60) == CLAIMED  # retry this one
        b.release()
        # an expired lease is taken over
        assert a.claim("k2", seconds=0.0) == CLAIMED
        assert b.claim("k2", seconds=60) == CLAIMED
    # a lease whose driver died is taken over
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO leases VALUES ('k3', ?, ?, ?, NULL, NULL)",
            (f"{a.owner.host}:{dead.pid}:x:y", a.owner.host, dead.pid),
        )
    conn.close()
    with ResultsStore(path) as c:
        assert c.claim("k3", seconds=None) == CLAIMED


def _sweep_proc(db: Path, ids: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}", "LBFAULT_LOG": str(log),
           "LBFAULT_SLEEP": "0.7"}  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", "sweep", "--agent", "uniform", "--problem",
         ids, "--workers", "1", "--import", "leaderboard_faults", "--results", str(db)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Popen fork+exec: no JAX in it
def test_two_identical_sweeps_at_once_run_each_job_once(tmp_path):
    db, log = tmp_path / "r.db", tmp_path / "runs.log"
    ids = ",".join(f"lbfault/clock-{i}" for i in range(8))
    first, second = _sweep_proc(db, ids, log), _sweep_proc(db, ids, log)
    outs = [p.communicate(timeout=600) for p in (first, second)]
    for p, (_, err) in zip((first, second), outs):
        assert p.returncode == 0, err[-2000:]
    runs = log.read_text().split()[::2]
    assert sorted(runs) == sorted(f"clock-{i}" for i in range(8))  # each job ran exactly once
    with ResultsStore(db, mode="r") as s:
        rows = s.rows()
    assert len(rows) == 8 and all(r["attempts"] == 1 and r["status"] == "ok" for r in rows)
    ran = [int(out.split(", ")[1].split()[0]) for out, _ in outs]  # "... N ok, ..."
    assert sum(ran) == 8, outs
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0
    conn.close()


# ------------------------------------------------------- found by trying it as a user would


def test_links_and_side_files_of_a_store_are_refused_everywhere(tmp_path, capsys):
    db = _store(tmp_path / "r.db")
    other = tmp_path / "w.db"
    ResultsStore(other).close()
    wal = tmp_path / "w.db-wal"
    wal.write_bytes(b"committed frames")  # as a killed sweep leaves it
    link = tmp_path / "latest.html"
    link.symlink_to(wal)
    assert main(["report", "--results", str(db), "--out", str(link)]) == 2
    _one_line_error(capsys, "belongs to the SQLite file")
    assert main(["leaderboard", "--results", str(db), "--export", str(link) + ".csv"]) == 0
    capsys.readouterr()
    assert wal.read_bytes() == b"committed frames"
    # a results path that is a side file of a store
    assert main(["sweep", "--agent", "uniform", "--problem", "coin/0", "--executor", "inline",
                 "--results", str(wal), "--quiet"]) == 2  # fmt: skip
    _one_line_error(capsys, "a side file of the SQLite file")
    assert wal.read_bytes() == b"committed frames"


def test_bad_output_paths_get_their_own_message(tmp_path, capsys):
    db = _store(tmp_path / "r.db")
    frozen = tmp_path / "frozen.csv"
    frozen.write_text("keep")
    os.chmod(frozen, 0o444)
    loop = tmp_path / "loop.html"
    loop.symlink_to(loop)
    (tmp_path / "folder").mkdir()
    cases = [
        (["leaderboard", "--export", str(frozen)], "which is read-only"),
        (["report", "--out", str(loop)], "cannot be resolved"),
        (["report", "--out", str(tmp_path / "folder")], "which is a folder; allowed: a file"),
        (["report", "--out", ""], "got ''; allowed: a file path"),
        (["report", "--out", str(db) + "/report.html"], "is a file; allowed: a path in a folder"),
    ]
    for argv, message in cases:
        assert main([*argv, "--results", str(db)]) == 2, argv
        _one_line_error(capsys, message)
    assert frozen.read_text() == "keep"
    bad_results = [
        (str(db) + "/sub.db", "is a file; allowed: a path in a folder"),
        ("/dev/null", "which is not a regular file"),
    ]
    for results, message in bad_results:
        assert main(["leaderboard", "--results", results]) == 2
        _one_line_error(capsys, message)


def test_unreadable_text_and_config_are_skipped_and_repaired(tmp_path, capsys):
    db = tmp_path / "r.db"
    ids = ["coin/0", "coin/1", "coin/2", "lbfault/raise"]
    jobs = expand(["uniform"], ids)
    with ResultsStore(db) as s:
        run_sweep(jobs, s, InlineExecutor(imports=("leaderboard_faults",)))
    with sqlite3.connect(db) as conn:
        bad_config = "UPDATE results SET config = '{bad' WHERE key = ?"
        conn.execute(bad_config, (jobs[0].key,))
        bad_utf8 = "UPDATE results SET metrics = CAST(X'7B22FF223A317D' AS TEXT) WHERE key = ?"
        conn.execute(bad_utf8, (jobs[1].key,))
        error_utf8 = "UPDATE results SET error = CAST(X'626164FF' AS TEXT) WHERE key = ?"
        conn.execute(error_utf8, (jobs[3].key,))
    conn.close()
    assert main(["leaderboard", "--results", str(db), "--format", "csv"]) == 0
    err = capsys.readouterr().err
    assert err.count("testbed: warning:") == 2 and "unreadable config" in err
    assert jobs[0].key in err and jobs[1].key in err
    df = load(db)
    assert sorted(df["problem_id"]) == ["coin/2", "lbfault/raise"]
    assert df.set_index("problem_id").loc["lbfault/raise", "error"] == "bad\ufffd"
    argv = ["sweep", "--agent", "uniform", "--problem", ",".join(ids), "--executor", "inline",
            "--import", "leaderboard_faults", "--results", str(db), "--quiet"]  # fmt: skip
    assert main(argv) == 1  # lbfault/raise is still a stored failure
    assert "4 jobs: 2 already stored, 2 ok, 0 failed" in capsys.readouterr().out
    assert len(load(db)) == 4


def test_a_damaged_schema_page_gives_one_line(tmp_path, capsys):
    db = _store(tmp_path / "r.db")
    data = bytearray(db.read_bytes())
    at = data.index(b"CREATE TABLE meta")
    data[at + 7] = 0xFF  # a byte of the schema's text that is not UTF-8
    db.write_bytes(bytes(data))
    for argv in (["leaderboard"], ["report", "--out", str(tmp_path / "x.html")]):
        assert main([*argv, "--results", str(db)]) == 2
        _one_line_error(capsys, "results: ")


def test_salvage_copies_every_readable_row_of_a_damaged_store(tmp_path, capsys):
    db = tmp_path / "r.db"
    with ResultsStore(db) as s:
        for i in range(300):
            job = Job.make("uniform", {"i": i}, f"coin/{i % 18}").as_dict()
            s.record({**job, "status": "ok", "metrics": {"kl_estimate": 0.1}, "traceback": "x"})
            s._conn.execute(
                "UPDATE results SET traceback = ? WHERE key = ?", ("t" * 300, job["key"])
            )
    with open(db, "r+b") as f:  # a leaf page of the results table
        f.seek(4096 * 30)
        f.write(os.urandom(4096))
    before = _digest(db)[""]
    assert main(["leaderboard", "--results", str(db)]) == 2
    assert "testbed salvage --results" in capsys.readouterr().err
    new = tmp_path / "new.db"
    assert main(["salvage", "--results", str(db), "--out", str(new)]) == 0
    out = capsys.readouterr().out
    copied = int(out.split()[1])
    assert 250 <= copied < 300 and f"({300 - copied} unreadable)" in out
    assert _digest(db)[""] == before  # the damaged file is not changed
    with ResultsStore(new, mode="r") as s:
        assert len(s.rows()) == copied
    assert main(["salvage", "--results", str(db), "--out", str(new)]) == 2  # never overwrites
    _one_line_error(capsys, "which exists; allowed: a new file")


def test_messages_for_stores_that_hold_nothing_to_rank(tmp_path, capsys):
    db = tmp_path / "failed.db"
    argv = ["sweep", "--agent", "uniform", "--problem", "lbfault/raise", "--executor", "inline",
            "--import", "leaderboard_faults", "--results", str(db), "--quiet"]  # fmt: skip
    assert main(argv) == 1
    capsys.readouterr()
    assert main(["leaderboard", "--results", str(db)]) == 2
    _one_line_error(capsys, "all 1 jobs in")
    (tmp_path / "empty.db").write_bytes(b"")
    assert main(["leaderboard", "--results", str(tmp_path / "empty.db")]) == 2
    _one_line_error(capsys, "an empty file (no results yet)")
    with sqlite3.connect(tmp_path / "foreign.db") as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert main(["leaderboard", "--results", str(tmp_path / "foreign.db")]) == 2
    _one_line_error(capsys, "without testbed results (no 'meta' table)")
    assert main(["leaderboard", "--failures", "--results", str(db), "--export", "x.csv"]) == 2
    _one_line_error(capsys, "--export: got 'x.csv' with --failures")
    assert main(["leaderboard", "--failures", "--results", str(db), "--sweep", "coin"]) == 0
    assert "failed jobs (0)" in capsys.readouterr().out
    assert main(["sweep", "--agent", "uniform", "--problem", ",", "--results", str(db)]) == 2
    _one_line_error(capsys, "--problem: got ','")


@pytest.mark.parametrize("value", ["00", "0e0", "-0", "0.00"])
def test_every_spelling_of_zero_means_no_limit(value):
    assert check_timeout(value) is None


def test_negative_timeouts_get_our_message_and_tiny_ones_time_out(tmp_path, capsys):
    argv = ["sweep", "--agent", "uniform", "--problem", "coin/0", "--executor", "inline",
            "--results", str(tmp_path / "r.db"), "--quiet"]  # fmt: skip
    for value in ("-inf", "-1e3"):
        assert main([*argv, "--timeout", value]) == 2
        _one_line_error(capsys, f"timeout: got '{value}'")
    assert main([*argv, "--timeout", "1e-7"]) == 1
    assert "timed out after 1e-07 s (interrupted)" in capsys.readouterr().out


# A module for --import that, in the sweep's driver only, sends SIGINT to its own process
# from inside a gc callback once the file GC_SIGINT_TRIGGER exists: Python's handler then
# raises KeyboardInterrupt inside the callback, where it is dropped ("Exception ignored
# in: <function ...>"), as happens when Ctrl-C lands in JAX's `_xla_gc_callback`.
GC_INTERRUPT = """
import gc, multiprocessing, os, signal, time

TRIGGER = os.environ["GC_SIGINT_TRIGGER"]
fired = []


def interrupt_inside_gc(phase, info):
    if fired or not os.path.exists(TRIGGER):
        return
    fired.append(True)
    os.kill(os.getpid(), signal.SIGINT)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:  # Python runs the SIGINT handler in here
        pass


if multiprocessing.parent_process() is None:  # the driver, not its workers
    gc.callbacks.append(interrupt_inside_gc)
    gc.set_threshold(50)  # collect often: the trigger is seen at once
"""


# A terminal's foreground job has SIGINT at its default; a test run started in the
# background of a non-interactive shell (`cmd &`) inherits it ignored, and an ignored signal
# stays ignored through exec. Reset it, then exec the command.
AS_A_TERMINAL_STARTS_IT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def _interruptible_sweep(tmp_path: Path, name: str, jobs: int = 40) -> tuple:
    """A sweep of clock jobs in a session of its own (as a terminal's foreground job),
    long enough (40 x 0.3 s on 2 workers) to be still running when the interrupt lands
    on a loaded machine; an interrupted sweep stops early, so the test stays short."""
    db, log, trigger = tmp_path / f"{name}.db", tmp_path / f"{name}.log", tmp_path / f"{name}.go"
    module = tmp_path / "gc_interrupt.py"
    module.write_text(GC_INTERRUPT)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}", "LBFAULT_LOG": str(log),
           "LBFAULT_SLEEP": "0.3", "GC_SIGINT_TRIGGER": str(trigger)}  # fmt: skip
    ids = ",".join(f"lbfault/clock-{i}" for i in range(jobs))
    proc = subprocess.Popen(
        [sys.executable, "-c", AS_A_TERMINAL_STARTS_IT, "-m", "experiments.cli", "sweep",
         "--agent", "uniform", "--problem", ids, "--workers", "2", "--import",
         "leaderboard_faults", "--import", str(module), "--results", str(db), "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    return proc, db, log, trigger


def _logged(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _interrupt_at(moment: str, proc, log: Path, trigger: Path) -> None:
    """Waits for `moment` of the sweep `proc`, then interrupts it as Ctrl-C does."""
    deadline = time.monotonic() + 120
    while _logged(log) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if moment == "inside a gc callback":
        trigger.touch()  # the driver signals itself from its next gc callback
    else:
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group


def _check_interrupted(proc, db: Path, moment: str, one_line: bool = True) -> int:
    """The sweep stopped with one line (the last, when not `one_line`: a worker still
    importing may print its own traceback) and status 130, kept its finished jobs and no
    lease."""
    out, err = proc.communicate(timeout=60)
    said = err.strip() if one_line else err.strip().splitlines()[-1:]
    assert (proc.returncode, said) == (
        130,
        "testbed: interrupted" if one_line else ["testbed: interrupted"],
    ), (moment, err)
    assert out == ""
    if not db.exists():  # interrupted before the store was created
        return 0
    with ResultsStore(db, mode="r") as s:
        rows = s.rows()
    assert all(r["status"] == "ok" for r in rows), moment
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0
    conn.close()
    return len(rows)


MOMENTS = ("mid-job", "inside a gc callback")


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Popen fork+exec: no JAX in it
def test_ctrl_c_stops_a_sweep_with_one_line_and_keeps_what_finished(tmp_path):
    """Ctrl-C at each moment of a sweep: mid-job, and when Python drops the
    KeyboardInterrupt inside a gc callback (the sweep used to run to its end and exit 0).
    The sweeps run at once, to keep the test short."""
    sweeps = {moment: _interruptible_sweep(tmp_path, f"s{i}") for i, moment in enumerate(MOMENTS)}
    waiters = [
        threading.Thread(target=_interrupt_at, args=(moment, proc, log, trigger))
        for moment, (proc, _, log, trigger) in sweeps.items()
    ]
    for t in waiters:
        t.start()
    for t in waiters:
        t.join()
    stored = {
        moment: _check_interrupted(proc, db, moment) for moment, (proc, db, _, _) in sweeps.items()
    }
    assert stored["mid-job"] >= 1
    assert stored["inside a gc callback"] < 40


def test_a_ctrl_c_while_a_worker_is_started_waits_for_the_driver(monkeypatch):
    """A Ctrl-C that lands while the driver forks and execs a worker (SIGINT blocked for
    the child's sake) is handled by the driver once the mask is restored: it used to be
    ignored there, and that sweep ran to its end and exited 0."""
    from multiprocessing import util

    from leaderboard.execution.processes import sigint_blocked as _sigint_blocked_in_children

    def spawn_hit_by_ctrl_c(path, args, passfds):
        os.kill(os.getpid(), signal.SIGINT)  # lands while the worker is being started
        time.sleep(0.05)
        return 4242

    monkeypatch.setattr(util, "spawnv_passfds", spawn_hit_by_ctrl_c)
    handled = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: handled.append(signum))
    try:
        with _sigint_blocked_in_children():
            assert util.spawnv_passfds("python", [], ()) == 4242
            for _ in range(100):  # Python runs a handler between bytecodes: very soon
                if handled:
                    break
                time.sleep(0.01)
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert handled == [signal.SIGINT]
    assert util.spawnv_passfds is spawn_hit_by_ctrl_c  # put back


def _booted_worker() -> tuple:
    """A worker process started as the process executor starts one (BOOT on a pipe): our
    end of the pipe and the process."""
    import multiprocessing

    from leaderboard.execution.processes import BOOT

    ours, child = multiprocessing.Pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", BOOT, str(child.fileno())], pass_fds=(child.fileno(),),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    child.close()
    return ours, proc


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Popen fork+exec: no JAX in it
@pytest.mark.parametrize("sent", [0, 1, 2])
def test_a_worker_whose_driver_stopped_before_sending_its_work_ends_quietly(sent):
    """A Ctrl-C that stops the driver between starting a worker and sending it its path,
    its preparation or its job: the worker ends with status 0 and prints nothing (its
    EOFError traceback used to follow the driver's one line)."""
    from leaderboard.execution.processes import _preparation

    ours, proc = _booted_worker()
    for message in [list(sys.path), _preparation()][:sent]:
        ours.send(message)
    ours.close()
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (0, "", "")


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Popen fork+exec: no JAX in it
def test_a_drivers_script_that_raises_eoferror_at_import_is_not_taken_for_a_stopped_driver(
    tmp_path,
):
    """Only the driver's silence ends a worker quietly: the driver's script raising
    EOFError while the worker imports it is a traceback and a failure, as any error."""
    script = tmp_path / "my_sweep.py"
    script.write_text('raise EOFError("from my script")\n')
    ours, proc = _booted_worker()
    ours.send(list(sys.path))
    ours.send({"init_main_from_path": str(script)})
    out, err = proc.communicate(timeout=60)
    ours.close()
    assert proc.returncode == 1 and "EOFError: from my script" in err


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # Popen fork+exec: no JAX in it
@pytest.mark.parametrize("repeat", range(4))
def test_ctrl_c_at_random_moments_always_stops_a_sweep(tmp_path, repeat):
    """Ctrl-C after a random delay (driver start-up, worker start-up, jobs running), one
    sweep after another, each at every moment as above. A worker still importing the stack
    may print its traceback before the driver's line: only the last line is checked."""
    import random

    for i, moment in enumerate(MOMENTS):
        proc, db, log, trigger = _interruptible_sweep(tmp_path, f"s{i}")
        _interrupt_at(moment, proc, log, trigger)
        _check_interrupted(proc, db, moment)
    delays = random.Random(repeat).sample(range(500, 10000), 6)
    for delay in delays:
        # 120 x 0.3 s on 2 workers outlasts the longest delay on a fast machine: a sweep
        # that had already finished would meet the Ctrl-C in interpreter shutdown (-2)
        proc, db, _, _ = _interruptible_sweep(tmp_path, f"r{delay}", jobs=120)
        time.sleep(delay / 1000)
        os.killpg(proc.pid, signal.SIGINT)
        _check_interrupted(proc, db, f"after {delay} ms", one_line=False)


@pytest.mark.slow  # end to end through fresh processes (12 s); CI runs it
@pytest.mark.parametrize("limit, fresh", [(1e-6, True), (0, False)])
def test_a_worker_that_outgrew_its_memory_is_replaced_between_jobs(
    limit, fresh, tmp_path, monkeypatch
):
    """A worker holding more than `worker_memory_gb` after a job is replaced before the
    next (a sweep of hours would otherwise meet the out-of-memory killer); every job still
    runs once and is stored. 0 keeps workers for the whole sweep."""
    log = tmp_path / "runs.log"
    monkeypatch.setenv("LBFAULT_LOG", str(log))
    monkeypatch.setenv("LBFAULT_SLEEP", "0")
    jobs = expand(["uniform"], [f"lbfault/clock-{i}" for i in range(2)])
    executor = LocalExecutor(workers=1, imports=("leaderboard_faults",), worker_memory_gb=limit)
    with ResultsStore(tmp_path / "r.db") as s:
        summary = run_sweep(jobs, s, executor)
    assert summary.ok == 2
    names, pids = log.read_text().split()[::2], log.read_text().split()[1::2]
    assert sorted(names) == ["clock-0", "clock-1"]
    assert len(set(pids)) == (2 if fresh else 1)


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "4", True, None])
def test_worker_memory_must_be_a_finite_number_of_gb(value):
    with pytest.raises(InputError, match="worker_memory_gb: got .*; allowed: a finite number"):
        LocalExecutor(worker_memory_gb=value)
