"""The newcomer's path, end to end (issue 47): the README's job leaves a `uniform` run on
part of the problems; an agent of one's own runs over a sweep; `testbed leaderboard
--sweep` and `testbed report` rank it beside the shipped reference agents. The ranking
must be the complete one: normalised by the shipped `uniform` (the user's covers part),
no problem counted 1e6, the partial run shown apart and named on stderr.

A small sweep of the shipped problems (three environments of classification_2d, each at
tau 1 and 10), the command line in-process with the inline executor."""

from __future__ import annotations

import io
import sys

import numpy as np
import pandas as pd
import pytest

import leaderboard
from experiments.cli import main
from leaderboard import shipped_files

SWEEP = "rank_my_agent_small"
IDS = [f"classification_2d/{i}" for i in (0, 210, 1, 211, 2, 212)]  # tau 1 and 10 pairs
MODULE = f'''
import jax
import jax.numpy as jnp
import numpy as np

import agents
import generative


@generative.register_sweep("{SWEEP}")
def small():
    return {IDS!r}


@agents.register("my_centroids", predicts="labels")
def my_centroids(train_data, prior, *, jitter: float = 0.3, seed: int = 0):
    x, y = np.asarray(train_data.x, np.float32), np.asarray(train_data.y)
    centroids = jnp.asarray([x[y == c].mean(0) if np.any(y == c) else np.zeros(prior.input_dim)
                             for c in range(prior.num_classes)])

    def sampler(x, key):
        shifted = centroids + jitter * jax.random.normal(key, centroids.shape)
        return -jnp.sum((x[:, None, :] - shifted[None]) ** 2, axis=-1)

    return sampler
'''


def _tables(csv: str) -> dict[str, pd.DataFrame]:
    rows = pd.read_csv(io.StringIO(csv))
    return {title: t.set_index("label") for title, t in rows.groupby("table", sort=False)}


def test_a_new_agent_is_ranked_beside_the_shipped_ones_with_partial_own_runs_present(
    tmp_path, monkeypatch, capsys, scoped_registries
):
    monkeypatch.chdir(tmp_path)
    module = tmp_path / "rank_my_agent_module.py"
    module.write_text(MODULE)
    monkeypatch.delitem(sys.modules, module.stem, raising=False)
    db = str(tmp_path / "mine.db")
    inline = ["--executor", "inline", "--results", db]
    # the README's job, cut short: uniform on one environment (2 of the sweep's 6 problems)
    assert main(["sweep", "--agent", "uniform", "--problem", ",".join(IDS[:2]), *inline]) == 0
    # an agent of one's own over the whole (small) sweep
    mine = ["--import", str(module), "--sweep", SWEEP]
    assert main(["sweep", "--agent", "my_centroids", *mine, *inline]) == 0
    capsys.readouterr()

    assert main(["leaderboard", *mine, "--results", db, "--format", "csv"]) == 0
    out = capsys.readouterr()
    tables = _tables(out.out)
    ran = leaderboard.load(db).set_index("problem_id")
    ran = ran[ran["agent"] == "my_centroids"]["kl_estimate"]
    ours = leaderboard.published("neural_testbed")
    ours = ours[(ours["agent"] == "uniform") & ours["problem_id"].isin(IDS)]
    shipped_uniform = ours.set_index("problem_id")["kl_estimate"]
    for tau, ids in ((1, IDS[0::2]), (10, IDS[1::2])):
        (title,) = [t for t in tables if f"tau={tau} (" in t and "configs that ran" not in t]
        assert title.endswith("(normalised by uniform (ours, shipped))")
        table = tables[title]
        tuned = len(set(shipped_files.shipped("tuned_references")["agent"]))
        assert len(table) == 16 + tuned  # 15 shipped reference agents, the tuned, the user's
        assert "uniform" not in table.index  # the user's partial uniform: apart
        expected = ran[ids].mean() / np.mean([max(shipped_uniform[i], 0.0) for i in ids])
        assert table.loc["my_centroids", "normalized_kl"] == pytest.approx(expected, rel=1e-6)
        assert table.loc["uniform (ours, shipped)", "normalized_kl"] == pytest.approx(1.0)
        assert (table["mean_kl"] < 1e3).all() and (table["normalized_kl"] > 1e-3).all()
        assert (table["num_problems"] == 3).all()
        assert table.loc["my_centroids", "whose"] == "yours"
        (apart,) = [t for t in tables if t.startswith(title + ": configs that ran part")]
        assert list(tables[apart].index) == ["uniform"]
        assert tables[apart].loc["uniform", "coverage"] == "1 of 3"
        # the user's uniform on its one problem is the shipped uniform's run of it
        assert tables[apart].loc["uniform", "normalized_kl"] == pytest.approx(1.0)
    assert "uniform (1 of 3 at tau 1, 1 of 3 at tau 10)." in out.err

    report = tmp_path / "mine.html"
    assert main(["report", *mine, "--results", db, "--out", str(report)]) == 0
    out = capsys.readouterr()
    assert "uniform (1 of 3 at tau 1, 1 of 3 at tau 10)." in out.err  # named on stderr too
    assert out.out.strip().splitlines()[-1] == f"report: {report.resolve()}"
    html = report.read_text()
    assert "normalised by uniform (ours, shipped)" in html
    assert 'data-table="kl-tau-1-partial"' in html and "my_centroids" in html
    assert "uniform (1 of 3 at tau 1, 1 of 3 at tau 10)." in html
