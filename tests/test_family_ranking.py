"""Families own their ranking: a family with a score of its own ranks in `testbed
leaderboard` and the report with no change in `leaderboard/`, and nothing there names a
family."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import generative
from testbed.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "my_ranked_family.py"
RULE_EXAMPLE = ROOT / "examples" / "my_ranking_rule.py"


def _testbed(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        capture_output=True, text=True, timeout=900, cwd=cwd,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_a_family_with_its_own_score_ranks_in_leaderboard_and_report(tmp_path):
    results, report = tmp_path / "r.db", tmp_path / "r.html"
    imports = ["--import", str(EXAMPLE)]
    ids = "brier_2d/2,brier_2d/3"  # n = 10 and 30 at T = 0.1
    run = _testbed("sweep", "--agent", "uniform,mlp", "--problem", ids, "--executor",
                   "inline", "--results", str(results), "-q", *imports, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    board = _testbed("leaderboard", "--results", str(results), "--format", "csv", *imports,
                     cwd=tmp_path)  # fmt: skip
    assert board.returncode == 0, board.stderr[-2000:]
    lines = board.stdout.strip().splitlines()
    header = lines[0].split(",")
    assert "mean_skill" in header and "normalized_skill" in header
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    # higher is better here: mlp ranks first, uniform's skill is 0
    assert [r["label"] for r in rows] == ["mlp", "uniform"]
    assert rows[0]["rank"] == "1" and abs(float(rows[1]["mean_skill"])) < 1e-9
    assert float(rows[0]["mean_skill"]) > 0.1
    made = _testbed("report", "--results", str(results), "--out", str(report), *imports,
                    cwd=tmp_path)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    page = report.read_text()
    assert 'data-table="skill-tau-1"' in page and "Brier skill" in page


@pytest.mark.slow  # end to end through fresh processes (12-29 s); CI runs it
def test_a_family_with_a_rule_of_its_own_ranks_in_leaderboard_and_report(tmp_path):
    """examples/my_ranking_rule.py: a `Rule` object of the family's own (median over
    problems) ranks through `testbed leaderboard` (also `--metric median`) and the report,
    with nothing in leaderboard/ changed for it."""
    results, report = tmp_path / "r.db", tmp_path / "r.html"
    imports = ["--import", str(RULE_EXAMPLE)]
    run = _testbed("sweep", "--agent", "uniform,average_class_probs", "--problem",
                   "median_2d/2,median_2d/3", "--executor", "inline", "--results",
                   str(results), "-q", *imports, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    for metric in ("auto", "median"):
        board = _testbed("leaderboard", "--results", str(results), "--format", "csv",
                         "--metric", metric, *imports, cwd=tmp_path)  # fmt: skip
        assert board.returncode == 0, board.stderr[-2000:]
        lines = board.stdout.strip().splitlines()
        header = lines[0].split(",")
        assert {"median_score", "num_problems", "num_failed"} <= set(header)
        rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
        assert sorted(r["label"] for r in rows) == ["average_class_probs", "uniform"]
        medians = [float(r["median_score"]) for r in rows]
        assert medians == sorted(medians) and [r["rank"] for r in rows] == ["1", "2"]
        assert all(r["num_problems"] == "2" and r["num_failed"] == "0" for r in rows)
    made = _testbed("report", "--results", str(results), "--out", str(report), *imports,
                    cwd=tmp_path)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    page = report.read_text()
    assert "median joint KL" in page and "a few problems where an agent fails badly" in page
    assert "the agent config&#x27;s median score over the problems it ran" in page


def test_the_rule_of_a_family_leaves_out_a_failed_problem_and_ranks_by_the_median():
    """The example rule on stored rows: a failed job is counted, not scored; the median
    (not the mean) ranks; the board's tables and legend come from the rule."""
    import numpy as np
    import pandas as pd

    from leaderboard.ranking.board import legend, rank, tables
    from leaderboard.ranking.rules import rule_of

    __import__("runpy").run_path(str(RULE_EXAMPLE))
    rows = pd.DataFrame({
        "key": [f"k{i}" for i in range(6)], "agent": ["a"] * 3 + ["b"] * 3,
        "config_key": ["ca"] * 3 + ["cb"] * 3, "config": ["{}"] * 6,
        "problem_id": [f"median_2d/{i}" for i in (0, 1, 2)] * 2, "agent_seed": [0] * 6,
        "status": ["ok"] * 5 + ["failed"],
        "kl_estimate": [0.1, 0.2, 9.0, 0.3, 0.35, np.nan],  # a: mean 3.1, median 0.2
    })  # fmt: skip
    board = rank(rows, shipped=False)
    ((title, table),) = tables(board)
    assert title == "median joint KL" and rule_of(board.rankings[0].spec).name == "median"
    assert list(table.columns) == ["rank", "label", "median_score", "num_problems", "num_failed"]
    assert table["median_score"].tolist() == pytest.approx([0.2, 0.325])
    assert table.drop(columns="median_score").to_dict("list") == {
        "rank": [1, 2], "label": ["a", "b"], "num_problems": [3, 2], "num_failed": [0, 1],
    }  # fmt: skip
    assert any(line.startswith("num_failed: problems that failed") for line in legend(board))


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings (nor the package names
    recorded with a result)."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "versions":
            skip |= {id(n) for n in ast.walk(node)}
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]


def test_no_family_is_named_in_the_leaderboard():
    families = set(generative.FAMILIES)
    found = []
    for path in sorted((ROOT / "leaderboard").rglob("*.py")):
        for line, text in _string_constants(path):
            words = text.replace("/", " / ").split()
            if (
                text in families
                or any(f"{f}/" in text for f in families)
                or (len(words) == 1 and words[0] in families)
            ):
                found.append(f"{path.name}:{line}: {text!r}")
    assert not found, found


def test_the_neural_testbeds_rule_is_named_for_it_and_its_earlier_name_still_declares_it():
    from testbed.ranking import JOINT_KL, NEURAL_TESTBED, RankedBy

    assert JOINT_KL.rule == NEURAL_TESTBED == "neural_testbed"
    assert RankedBy(score="s", name="s", rule="testbed").rule == NEURAL_TESTBED
    with pytest.raises(InputError, match="ranked_by rule: got 'median'"):
        RankedBy(score="s", name="s", rule="median")  # a rule of one's own: an object


def test_a_rule_of_ones_own_needs_a_name_and_a_metric_and_its_own_rank():
    from leaderboard.ranking.rules import Rule, rule_of
    from testbed.ranking import RankedBy

    class Nameless(Rule):
        pass

    with pytest.raises(InputError, match="rule name and metric: got"):
        rule_of(RankedBy(score="s", name="s", rule=Nameless()))

    class Unranked(Rule):
        name, metric = "mine", "mine"

    rule = rule_of(RankedBy(score="s", name="s", rule=Unranked()))
    with pytest.raises(NotImplementedError, match="rule 'mine': a Rule subclass overrides rank"):
        rule.rank(None, {}, None)


# ------------------------------------------------------------ a rule's settings are its own
def test_a_declaration_keeps_its_rules_settings_apart_and_refuses_another_rules():
    import dataclasses

    from testbed.ranking import JOINT_KL, NeuralTestbedSettings, PerCellSettings, RankedBy, c2st

    assert JOINT_KL.settings == NeuralTestbedSettings(
        normalizer="uniform", finite_share="pct_finite_kl", marginal_name="marginal KL"
    )
    assert JOINT_KL.normalizer == "uniform" and JOINT_KL.short == "kl"  # read through
    nll = dataclasses.replace(JOINT_KL, score="joint_nll", short="nll", finite_share="f")
    said = (nll.settings.finite_share, nll.settings.normalizer, nll.short)
    assert said == ("f", "uniform", "nll")
    sbi = c2st(("task",), replicate="k")
    assert sbi.settings == PerCellSettings(cell=("task",), replicate="k") and sbi.short == "c2st"
    with pytest.raises(
        InputError,
        match="ranked_by normalizer: got 'uniform'; allowed: the "
        "settings of rule 'observations': cell, replicate, apart, published",
    ):
        c2st(("task",), normalizer="uniform")
    with pytest.raises(
        InputError,
        match="ranked_by cell: got .*rule 'neural_testbed': "
        "normalizer, finite_share, clip_negative, accuracy, marginal_name",
    ):
        RankedBy(score="s", name="s", cell=("task",))
    with pytest.raises(InputError, match=r"ranked_by cell: got \(\); allowed: settings columns"):
        RankedBy(score="s", name="s", rule="observations")
    with pytest.raises(InputError, match="ranked_by settings: got PerCellSettings"):
        dataclasses.replace(sbi, rule="neural_testbed")  # the settings of another rule


def test_a_rule_of_ones_own_declares_its_settings_and_its_tables_key():
    import dataclasses

    import pandas as pd

    from leaderboard.ranking.board import rank
    from leaderboard.ranking.rules import Rule
    from testbed.ranking import RankedBy

    @dataclasses.dataclass(frozen=True)
    class Cut:
        at: float = 1.0

    class CutRule(Rule):
        name, metric, settings_type = "cut", "cut", Cut

    spec = RankedBy(score="s", name="s", rule=CutRule(), at=2.0)
    assert spec.settings == Cut(2.0) and spec.short == "s"  # no rule default: the score
    with pytest.raises(
        InputError, match="ranked_by finite_share: got 'x'; allowed: the settings of rule 'cut': at"
    ):
        RankedBy(score="s", name="s", rule=CutRule(), finite_share="x")
    with pytest.raises(InputError, match="ranked_by normalizer: .*rule 'mine': none"):
        RankedBy(score="s", name="s", rule=type("Mine", (Rule,), {"name": "mine"})(),
                 normalizer="uniform")  # fmt: skip
    rows = pd.DataFrame({"key": ["k"], "agent": ["a"], "config_key": ["c"], "config": ["{}"],
                         "problem_id": ["coin/4"], "agent_seed": [0], "status": ["ok"],
                         "kl_estimate": [0.1]})  # fmt: skip
    board = rank(rows, shipped=False, tau=1)  # the Neural Testbed rule's tables' key
    assert [(r.part, r.tau) for r in board.rankings] == [(1, 1)]
    with pytest.raises(TypeError, match="unexpected keyword argument 'size'"):
        rank(rows, shipped=False, size=1)  # no rule's tables are per `size`
