"""A Ray cluster's faults are the runner's faults (issue 48, reproduction 4): when the
head's GCS died mid-sweep, the driver exited 1 after 60 s with Ray's own log line, no
summary and no `testbed: error` line. Now the sweep stops within RAY_HEAD_LOST_SECONDS
with one line, exit status 3 and what is stored; the committed rows are intact.

A local two-node cluster (`ray.cluster_utils.Cluster`): slow, about a minute."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'testbed[ray]')")

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def _stored(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_the_heads_death_is_one_line_with_status_3_and_what_is_stored(tmp_path, monkeypatch):
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{TESTS}")  # the workers' imports
    monkeypatch.setenv("LBFAULT_SLEEP", "2")  # the cluster's workers: 80 s of work on 2
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    cluster.add_node(num_cpus=1)
    db = tmp_path / "r.db"
    ids = ",".join(f"lbfault/clock-{i}" for i in range(80))
    env = {**os.environ, "TESTBED_PROGRESS": "off"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", "sweep", "--agent", "uniform", "--problem",
         ids, "--import", "leaderboard_faults", "--executor", "ray", "--address",
         cluster.address, "--workers", "2", "--results", str(db), "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while _stored(db) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        cluster.head_node.kill_gcs_server()
        killed = time.monotonic()
        out, err = proc.communicate(timeout=180)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
        cluster.shutdown()
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert proc.returncode == 3, err
    assert len(lines) == 1 and lines[0].startswith("testbed: error: ray cluster: its head"), err
    assert "of the sweep's 80 are stored: run it again to resume" in lines[0]
    assert took < 60  # before Ray's driver would have ended itself
    stored = _stored(db)
    assert 3 <= stored < 80
    with sqlite3.connect(db) as conn:  # the committed rows are intact
        assert conn.execute("PRAGMA quick_check").fetchone() == ("ok",)
        assert f"{stored} of the sweep's" in lines[0]


@pytest.mark.slow
def test_a_lost_node_loses_no_job_and_keeps_rays_log_out(tmp_path, monkeypatch):
    """A node of the cluster dies mid-sweep (its raylet SIGKILLed): the sweep goes on on
    the head; every job is stored once, as ok or as failed with Ray's reason
    (`--retry-failed` runs those again); Ray's 20 lines of the dead raylet's log, which
    reached the terminal, are DEBUG lines now (-v)."""
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{TESTS}")
    monkeypatch.setenv("LBFAULT_SLEEP", "1")  # the cluster's workers
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    node = cluster.add_node(num_cpus=1)
    db = tmp_path / "r.db"
    ids = ",".join(f"lbfault/clock-{i}" for i in range(16))
    env = {**os.environ, "TESTBED_PROGRESS": "off"}
    argv = [sys.executable, "-m", "experiments.cli", "sweep", "--agent", "uniform",
            "--problem", ids, "--import", "leaderboard_faults", "--executor", "ray",
            "--address", cluster.address, "--workers", "2", "--results", str(db),
            "--quiet"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while _stored(db) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        cluster.remove_node(node, allow_graceful=False)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        cluster.shutdown()
    assert "Raylet is terminated" not in err and "Traceback" not in err, err
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT problem_id, status FROM results").fetchall()
        errors = [e for (e,) in conn.execute("SELECT error FROM results WHERE status != 'ok'")]
    assert len(rows) == len(set(rows)) == 16  # every job stored: none lost, none doubled
    assert all("ray task failed" in e for e in errors), errors
    assert proc.returncode == (1 if errors else 0), err


def test_the_head_watch_knocks_at_the_gcs_port(monkeypatch):
    import socket

    from leaderboard.execution import ray_executor as executors
    from testbed.errors import EnvironmentFault

    monkeypatch.setattr(executors, "RAY_HEAD_PROBE_SECONDS", 0.0)
    with socket.socket() as server:  # a head that answers
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        watch = executors.HeadWatch(address, lost_seconds=0.0)
        watch.check()
    with pytest.raises(EnvironmentFault, match=r"ray cluster: its head \(GCS at 127.0.0.1"):
        watch.check()  # the port closed: silent for longer than lost_seconds
    executors.HeadWatch(None).check()  # no address known: no watch


@pytest.mark.parametrize(
    ("given", "env", "expected"),
    [(None, None, ("local", "ray address")), ("", None, ("local", "ray address")),
     (None, "10.0.0.5:6379", ("10.0.0.5:6379", "RAY_ADDRESS")),
     ("h:1", "10.0.0.5:6379", ("h:1", "ray address")), (None, "  ", ("local", "ray address")),
     ("auto", None, ("auto", "ray address"))],
)  # fmt: skip
def test_no_address_is_a_local_ray_unless_ray_address_names_one(given, env, expected, monkeypatch):
    from leaderboard.execution.ray_executor import cluster_address

    if env is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", env)
    assert cluster_address(given) == expected


@pytest.mark.slow
def test_a_sweep_without_address_never_joins_the_cluster_left_on_the_machine(tmp_path, monkeypatch):
    """Ray's own default (address None) joins the cluster the last `ray start` on the
    machine wrote down (/tmp/ray/ray_current_cluster): a sweep meant to run alone ran on
    another sweep's cluster and lost its jobs when that cluster lost a node (CI, stop 63).
    Without --address the sweep starts a Ray of its own."""
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        # what Ray's default would join
        assert ray._private.utils.read_ray_address() == cluster.address
        env = {**os.environ, "TESTBED_PROGRESS": "off", "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}"}
        proc = subprocess.run(
            [sys.executable, "-m", "experiments.cli", "sweep", "--agent", "uniform",
             "--problem", "coin/0", "--executor", "ray", "--workers", "1",
             "--results", str(tmp_path / "r.db"), "--json"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        cluster.shutdown()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Connecting to existing Ray cluster" not in proc.stderr, proc.stderr[-2000:]
    assert "Started a local Ray instance" in proc.stderr, proc.stderr[-2000:]


def test_a_bad_address_is_named_where_it_came_from():
    from leaderboard.execution.ray_executor import ray_endpoint
    from testbed.errors import InputError

    with pytest.raises(InputError, match=r"^ray address: got ':5'; .* or none for a local Ray$"):
        ray_endpoint(":5")
    with pytest.raises(InputError, match=r"^RAY_ADDRESS: got ':5'; .* or unset it for a local"):
        ray_endpoint(":5", "RAY_ADDRESS")
