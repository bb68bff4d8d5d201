"""How a problem family is ranked: declared by the family, read by the leaderboard.

A family registers a `RankedBy`: the metric it is ranked on and the rule that ranks it.
The leaderboard applies the rule to whatever families are present and names none of
them, so a new family with a score of its own ranks without a change there.

Two rules, those of the papers the testbed reproduces:
- `NEURAL_TESTBED` (the Neural Testbed's): one table per tau; per agent config, the score of
  each problem (negative clipped to 0 when `clip_negative`; missing, failed or
  non-finite counts `FILL`, as does a problem whose `finite_share` column is below 1);
  mean over problems, normalised by the `normalizer` agent's mean; standard error over
  problem-seed groups (seed % 10); best config per agent over all its problems.
- `OBSERVATIONS` (the SBI benchmark's): per agent config and cell (the `cell` settings,
  e.g. task and budget), the mean score over the `replicate`s (observations) with a
  bootstrap interval; best config per agent over its cells.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from testbed.errors import bad_value

NEURAL_TESTBED = "neural_testbed"
OBSERVATIONS = "observations"
REGRET = "regret"  # the observations rule over bandit runs, with regret curves
RULES = (NEURAL_TESTBED, OBSERVATIONS, REGRET)
ALIASES = {"testbed": NEURAL_TESTBED}  # an earlier name a declaration may still use
FILL = 1e6  # the score of a missing, failed or non-finite problem (the Neural Testbed's)


@dataclasses.dataclass(frozen=True)
class Published:
    """A paper's runs that a family's rankings show beside ours, declared by the family
    whose results they are (`RankedBy.published`); its name is how titles say it.

    `name`: the file of runs (`leaderboard.published(name)`: one row per run, columns
    `algorithm`, the cell's and the replicate's, and `score`; `runtime_minutes` where the
    paper gives it); `citation`: whose numbers, as the `paper_source` column says it;
    `agents`: (our agent, the paper's algorithm) pairs; `columns`: (the file's column,
    the ranking's) renames, e.g. ("num_simulations", "budget"); `newer`: a file of newer
    methods' published means at the same cells (columns `agent`, the cell's, `score`,
    `source`), or None; `column_help`: (column, what it means) of the paper's columns.
    """

    name: str
    citation: str
    agents: tuple[tuple[str, str], ...]
    columns: tuple[tuple[str, str], ...] = ()
    score: str = "c2st"
    newer: str | None = None
    column_help: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.name

    def agent_of(self) -> dict[str, str]:
        """The paper's algorithm -> our agent."""
        return {paper: ours for ours, paper in self.agents}


@dataclasses.dataclass(frozen=True)
class RankedBy:
    """What a family's problems are ranked on, and how (see the module doc).

    `rule`: the name of a built-in rule (`RULES`) or a rule object of the family's own
    (`leaderboard.ranking.rules.Rule`: its tables, columns, titles and plots). `score`: the
    metric column; `name`: what it is, as titles say it (`joint KL`);
    `short`: the suffix of the table's columns (`normalized_<short>`, `mean_<short>`);
    `marginal_name`: the title at tau = 1, where a joint score is a marginal one;
    `lower_is_better`: the direction; `normalizer`: the agent whose mean is 1 (skipped
    when absent), or None; `finite_share`: a column giving the share of finite test
    batches (below 1: ranked as non-finite); `clip_negative`: scores below 0 are
    estimation noise of a score >= 0 (a KL); `accuracy`: the tables show test accuracy
    and calibration; `note`: the report's sentence on the family's tables.
    Observations rule: `cell` (settings columns), `replicate` (None: one a cell),
    `apart` ((column, default, form) triples: a row whose settings column is not its
    default is a task of its own, `<task> (<form of the value>)`, never pooled with the
    others), `published` (a paper's runs shown beside ours: `Published`). `shipped`: the
    name of our own shipped runs of the family's problems, ranked beside a user's
    (`leaderboard.ranking.shipped`).
    """

    score: str
    name: str
    short: str = "kl"
    rule: Any = NEURAL_TESTBED  # a name of RULES, or a leaderboard.ranking.rules.Rule
    marginal_name: str | None = None
    lower_is_better: bool = True
    normalizer: str | None = None
    finite_share: str | None = None
    clip_negative: bool = True
    accuracy: bool = True
    note: str = ""
    cell: tuple[str, ...] = ()
    replicate: str | None = None
    apart: tuple[tuple[str, object, str], ...] = ()
    published: Published | None = None
    shipped: str | None = None

    def __post_init__(self):
        if isinstance(self.rule, str) and self.rule in ALIASES:
            object.__setattr__(self, "rule", ALIASES[self.rule])
        if isinstance(self.rule, str) and self.rule not in RULES:
            raise bad_value("ranked_by rule", self.rule, RULES)
        if self.rule in (OBSERVATIONS, REGRET) and not self.cell:
            raise bad_value("ranked_by cell", self.cell, "settings columns, e.g. ('task',)")

    def title(self, tau: int | None) -> str:
        """What a table of this family at `tau` scores."""
        if tau == 1 and self.marginal_name:
            return self.marginal_name
        return self.name


JOINT_KL = RankedBy(
    score="kl_estimate",
    normalizer="uniform",
    name="joint KL",
    marginal_name="marginal KL",
    finite_share="pct_finite_kl",
    note=(
        "KL from the environment's predictive to the agent's over tau test inputs "
        "(0 = the environment's own predictive); normalised so that the normalising agent "
        "(uniform: the class probabilities 1/C) is 1."
    ),
)


def _per_cell(rule: str, cell: tuple[str, ...], **fields: Any) -> RankedBy:
    """A score ranked as it is, per `cell` by `rule` (observations or regret): no normalising
    agent, no clipping, no accuracy tables; `fields` name the score and say the rest."""
    return RankedBy(
        rule=rule, normalizer=None, clip_negative=False, accuracy=False, cell=cell, **fields
    )


def c2st(cell: tuple[str, ...], **more) -> RankedBy:
    """Ranked on C2ST (0.5 = perfect) by the observations rule over `cell`; unnormalised."""
    return _per_cell(OBSERVATIONS, cell, score="c2st", name="C2ST", short="c2st", **more)


def regret(cell: tuple[str, ...], replicate: str) -> RankedBy:
    """Ranked on average regret per step (lower first) by the regret rule: the mean over
    the `replicate`s (bandit seeds) per `cell` with a bootstrap interval; unnormalised."""
    return _per_cell(
        REGRET,
        cell,
        score="average_regret",
        name="average regret",
        short="regret",
        replicate=replicate,
        note=(
            "Average regret per step of the agent as a Thompson sampler (best reward "
            "probability - chosen one; 0 = always the best action); uniform is the floor a "
            "learning agent must beat, a greedy mlp the trap of acting on a point estimate."
        ),
    )
