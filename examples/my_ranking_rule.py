"""A problem family ranked by a rule of its own: the median score over problems.

A family names its rule in `ranked_by` (`RankedBy(rule=...)`): one of the built-in
rules by name, or a `leaderboard.ranking.rules.Rule` object of the family's own. The rule
turns the family's result rows (a DataFrame) into ranking tables and says what they show;
`testbed leaderboard` and `testbed report` loop over the rules present, so nothing in
`leaderboard/` changes. Here the Neural Testbed's 2-d problems at T = 0.1 are ranked by
each agent config's median joint KL over the problems: robust to a few problems where an
agent fails badly (the Neural Testbed's rule averages and counts a failure as 1e6).

Run: python examples/my_ranking_rule.py
Sweep: testbed sweep --agent uniform,average_class_probs --sweep median_2d
    --import examples/my_ranking_rule.py
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

import generative
from generative.classification import (
    ClassificationProblem,
    ClassificationSettings,
    classification_2d_grid,
)
from leaderboard.ranking.rules import Ranked, Rule, Scope
from leaderboard.ranking.standings import Ranking
from testbed.ranking import RankedBy


class MedianRule(Rule):
    """One table per family: each agent config's median score over the problems it ran,
    failed and non-finite problems left out (counted in `num_failed`)."""

    name = "median"
    metric = "median"  # `testbed leaderboard --metric median` keeps only these tables
    note = "Median over problems: a few problems where an agent fails badly move it little."
    column_help = {
        "median_score": "the agent config's median score over the problems it ran",
        "num_problems": "problems with a finite score",
        "num_failed": "problems that failed or gave a non-finite score (left out)",
    }

    def rank(self, df: pd.DataFrame, specs: Mapping[str, RankedBy], scope: Scope) -> Ranked:
        out = Ranked()
        family = df["problem_id"].str.split("/", n=1).str[0]
        for fam, spec in specs.items():
            rows = df[family == fam]
            if spec.score not in rows:
                continue
            score = pd.to_numeric(rows[spec.score], errors="coerce")
            finite = (rows["status"] == "ok") & np.isfinite(score)
            entries = rows.assign(score=score.where(finite), finite=finite)
            table = entries.groupby(["agent", "config_key"], as_index=False).agg(
                median_score=("score", "median"),
                num_problems=("finite", "sum"),
                num_failed=("finite", lambda f: int((~f).sum())),
            )
            table["label"] = [scope.labels[key] for key in table["config_key"]]
            better = spec.lower_is_better
            table["rank"] = table["median_score"].rank(method="min", ascending=better)
            table["rank"] = table["rank"].fillna(len(table)).astype(int)
            table = table.sort_values(["rank", "label"], kind="stable").reset_index(drop=True)
            out.rankings.append(Ranking(spec, fam, None, table))
        return out

    def columns(self, spec: RankedBy) -> list[str]:
        return ["rank", "label", "median_score", "num_problems", "num_failed"]


MEDIAN_KL = RankedBy(
    score="kl_estimate",
    name="median joint KL",
    short="median",
    rule=MedianRule(),
    note="The joint KL of the Neural Testbed's 2-d problems at T = 0.1 (tau = 1).",
)
TABLE = [s for s in classification_2d_grid(1) if s["tau"] == 1 and s["temperature"] == 0.1]

if "median_2d" not in generative.FAMILIES:  # registered once, however often imported
    generative.registry.register_table(
        "median_2d", TABLE, ClassificationSettings, ClassificationProblem,
        "the 2-d Neural Testbed problems at T = 0.1, ranked by the median joint KL",
        options=("num_test_seeds", "num_enn_samples"), prediction="labels", ranked_by=MEDIAN_KL,
    )  # fmt: skip

if __name__ == "__main__":
    from leaderboard.ranking.board import rank, tables

    rows = pd.DataFrame(  # three problems' stored rows of two agents, one job failed
        {
            "key": [f"k{i}" for i in range(6)],
            "agent": ["uniform"] * 3 + ["mlp"] * 3,
            "config_key": ["u"] * 3 + ["m"] * 3,
            "config": ["{}"] * 6,
            "problem_id": [f"median_2d/{i}" for i in (0, 1, 2)] * 2,
            "agent_seed": [0] * 6,
            "status": ["ok"] * 5 + ["failed"],
            "kl_estimate": [0.9, 1.1, 1.0, 0.2, 0.3, np.nan],
        }
    )
    board = rank(rows, shipped=False)
    for title, table in tables(board):
        print(title)
        print(table.to_string(index=False))
