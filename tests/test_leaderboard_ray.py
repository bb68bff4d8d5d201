"""The Ray executor gives the same results as the local process pool (local Ray instance)."""

from __future__ import annotations

import pytest

from leaderboard.execution.executors import LocalExecutor, RayExecutor
from leaderboard.execution.jobs import expand
from leaderboard.execution.runner import run_sweep
from leaderboard.store import ResultsStore

ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'testbed[ray]')")
TIMING = ("train_seconds", "evaluation_seconds")


def _metrics(store: ResultsStore) -> dict[str, dict[str, float]]:
    return {
        r["key"]: {k: v for k, v in r["metrics"].items() if k not in TIMING}
        for r in store.rows()
        if r["status"] == "ok"
    }


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_ray_matches_local(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    jobs = expand(["uniform", "oracle"], ["coin/0", "coin/5", "coin/13"])
    ray_executor = RayExecutor(init_kwargs={"num_cpus": 2, "include_dashboard": False})
    with ResultsStore(tmp_path / "ray.db") as s:
        summary = run_sweep(jobs, s, ray_executor)
        from_ray = _metrics(s)
    assert not ray.is_initialized(), "the executor shuts down the Ray instance it started"
    with ResultsStore(tmp_path / "local.db") as s:
        run_sweep(jobs, s, LocalExecutor(workers=1))
        from_local = _metrics(s)
    assert (summary.ok, summary.failed) == (6, 0)
    assert sorted(from_ray) == sorted(j.key for j in jobs)
    assert from_ray == from_local  # identical numbers, not merely close
