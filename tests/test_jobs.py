"""One job type from expansion to the store: Job (with problem options), JobGroup,
JobResult; one grouping rule; one set of failure rules (testbed.evaluate_many)."""

from __future__ import annotations

import math

import pytest

import agents
import generative
import testbed
from experiments.cli import main
from leaderboard.execution.jobs import (
    Job,
    JobGroup,
    JobResult,
    expand,
    failed_results,
    training_groups,
)
from leaderboard.execution.results import load
from leaderboard.execution.worker import run_unit
from testbed.errors import InputError

PAIR = ["classification_2d_test/0", "classification_2d/0"]  # one environment and data


def test_keys_without_options_never_change_and_options_make_other_jobs():
    plain = Job.make("mlp", {"num_batches": 10}, "coin/0", 2)
    assert plain.key == f"{plain.config_key}/coin/0/2" and plain.options == {}
    a = Job.make("mlp", {}, "coin/0", options={"num_test_seeds": 50})
    b = Job.make("mlp", {}, "coin/0", options={"num_test_seeds": 60})
    assert len({a.key, b.key, Job.make("mlp", {}, "coin/0").key}) == 3
    assert a.key.startswith(Job.make("mlp", {}, "coin/0").key + "/")
    row = JobResult(a, metrics={"kl_estimate": 0.1}, versions={"jax": "x"}).row()
    assert row["versions"] == {"jax": "x", "problem_options": {"num_test_seeds": 50}}
    assert row["key"] == a.key and row["status"] == "ok"


def test_a_group_fails_every_job_and_keeps_the_traceback():
    group = JobGroup((Job.make("npe", {}, "sbi/two_moons/1000/1"),
                      Job.make("npe", {}, "sbi/two_moons/1000/2")))  # fmt: skip
    results = failed_results(group, "timed out after 5 s", 10.0, "stack")
    assert [r.key for r in results] == [j.key for j in group.jobs]
    assert all(not r.ok and r.traceback == "stack" for r in results)
    assert math.isnan(JobResult.failed(group.jobs[0], "x").wall_seconds)


def test_evaluate_many_keeps_errors_per_problem():
    """A refused problem fails alone and the others run; with errors='raise' it raises
    before any training."""
    problems = [generative.load("coin/0"), generative.load("sbi/two_moons/1000/1")]
    seen = []
    out = testbed.evaluate_many(
        agents.load("uniform"), problems, errors="keep", on_result=lambda i, v: seen.append(i)
    )
    assert isinstance(out[1], InputError) and "needs a posterior" in str(out[1])
    assert out[0]["kl_estimate"] > 0 and sorted(seen) == [0, 1]
    with pytest.raises(InputError, match="needs a posterior"):
        testbed.evaluate_many(agents.load("uniform"), problems)


def test_a_unit_runs_through_evaluate_many():
    """A group trains once; its results come one per job, the training's seconds on the
    first; a job whose problem cannot be built fails alone."""
    jobs = expand(["mlp"], PAIR, overrides={"num_batches": 20})
    (unit,) = training_groups(jobs)
    assert isinstance(unit, JobGroup) and unit.jobs == tuple(jobs)
    results = run_unit(unit)
    assert [r.status for r in results] == ["ok", "ok"]
    assert results[0].metrics["train_seconds"] > 0 == results[1].metrics["train_seconds"]
    assert all(r.metrics["shared_training"] == 2 for r in results)
    (bad,) = run_unit(Job.make("mlp", {"hidden_sizes": [-1]}, "coin/0"))
    assert bad.status == "failed" and "hidden_sizes" in bad.error and bad.traceback


def test_problem_options_go_with_a_sweeps_jobs(tmp_path, capsys):
    results = tmp_path / "r.db"
    argv = ["sweep", "--agent", "uniform", "--problem", "classification_2d_test/0", "--executor",
            "inline", "--results", str(results), "-q"]  # fmt: skip
    assert main([*argv, "--option", "num_test_seeds=20", "--option", "num_enn_samples=3"]) == 0
    assert main(argv) == 0  # without options: another job
    df = load(results).set_index("key")
    assert len(df) == 2
    with_options = df[df["problem_options"].notna()]
    assert with_options["problem_options"].iloc[0] == {"num_test_seeds": 20, "num_enn_samples": 3}
    alone = testbed.evaluate(
        agents.load("uniform"),
        generative.load("classification_2d_test/0", num_test_seeds=20, num_enn_samples=3),
    )
    assert with_options["kl_estimate"].iloc[0] == pytest.approx(alone["kl_estimate"])


def test_a_result_names_the_commit_of_the_code_that_made_it(tmp_path):
    """`versions()` (stored with every result) carries the git commit testbed's source is
    checked out at, "-dirty" with changed tracked files; an untracked folder has none."""
    import subprocess
    from pathlib import Path

    from leaderboard.provenance import source_commit, versions

    def git(*args, cwd=tmp_path):
        run = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(
            run, cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()

    assert source_commit(tmp_path) is None  # not a git checkout
    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "installed").mkdir()
    git("add", "code.py")
    git("commit", "-q", "-m", "first")
    head = git("rev-parse", "--short", "HEAD")
    assert source_commit(tmp_path) == head
    assert source_commit(tmp_path / "installed") is None  # a package git does not track
    (tmp_path / "code.py").write_text("x = 2\n")
    assert source_commit(tmp_path) == head + "-dirty"
    root = Path(__file__).resolve().parents[1]
    if (root / ".git").exists():  # this checkout (CI runs a clone)
        head = git("rev-parse", "--short", "HEAD", cwd=root)
        assert versions()["testbed_commit"].startswith(head)
