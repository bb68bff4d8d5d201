"""How a problem family is ranked: declared by the family, read by the leaderboard.

A family registers a `RankedBy`: the metric it is ranked on (`score`, `name`), which way
is better, the rule that ranks it, and that rule's own settings. The leaderboard applies
the rule to whatever families are present and names none of them, so a new family with a
score of its own ranks without a change there.

What every rule reads alike is a field of `RankedBy`: `score`, `name`, `short` (the suffix
of the score's columns, `mean_<short>`), `rule`, `lower_is_better`, `note`, `shipped`.
What one rule reads is that rule's settings object (`RankedBy.settings`), given as
keywords of `RankedBy` itself: `RankedBy(score="kl_estimate", name="joint KL",
normalizer="uniform")` fills the Neural Testbed rule's `NeuralTestbedSettings`. A keyword
the declared rule has no setting for is an `InputError` naming it and the rule's settings.

Two rules, those of the papers the testbed reproduces:
- `NEURAL_TESTBED` (the Neural Testbed's; `NeuralTestbedSettings`): one table per tau; per
  agent config, the score of each problem (negative clipped to 0 when `clip_negative`;
  missing, failed or non-finite counts `FILL`, as does a problem whose `finite_share`
  column is below 1); mean over problems, normalised by the `normalizer` agent's mean;
  standard error over problem-seed groups (seed % 10); best config per agent over all its
  problems.
- `OBSERVATIONS` (the SBI benchmark's; `PerCellSettings`): per agent config and cell (the
  `cell` settings, e.g. task and budget), the mean score over the `replicate`s
  (observations) with a bootstrap interval; best config per agent over its cells.
  `REGRET` is the same rule over bandit runs, with regret curves.

A rule of one's own (a `leaderboard.ranking.rules.Rule` object as `rule=`) declares the
type of its settings as its `settings_type` (None: it takes none).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

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
    whose results they are (`PerCellSettings.published`); its name is how titles say it.

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
class NeuralTestbedSettings:
    """The Neural Testbed rule's settings. `normalizer`: the agent whose mean is 1
    (skipped when absent), or None; `finite_share`: a column giving the share of finite
    test batches (below 1: ranked as non-finite); `clip_negative`: scores below 0 are
    estimation noise of a score >= 0 (a KL); `accuracy`: the tables show test accuracy and
    calibration; `marginal_name`: the title at tau = 1, where a joint score is a marginal
    one. A declaration that names no `short` gets `kl`."""

    normalizer: str | None = None
    finite_share: str | None = None
    clip_negative: bool = True
    accuracy: bool = True
    marginal_name: str | None = None
    default_short: ClassVar[str | None] = "kl"

    def title(self, name: str, tau: Any) -> str:
        """What a table at `tau` scores: the marginal name at tau = 1, else `name`."""
        return self.marginal_name if tau == 1 and self.marginal_name else name


@dataclasses.dataclass(frozen=True)
class PerCellSettings:
    """The per-cell rule's settings (`OBSERVATIONS`, `REGRET`). `cell`: the settings
    columns of a cell (required); `replicate`: the column of a cell's replicates (None: one
    a cell); `apart`: (column, default, form) triples: a row whose settings column is not
    its default is a task of its own, `<task> (<form of the value>)`, never pooled with the
    others; `published`: a paper's runs shown beside ours (`Published`), or None."""

    cell: tuple[str, ...] = ()
    replicate: str | None = None
    apart: tuple[tuple[str, object, str], ...] = ()
    published: Published | None = None
    default_short: ClassVar[str | None] = None  # the score's own name

    def __post_init__(self):
        if not self.cell:
            raise bad_value("ranked_by cell", self.cell, "settings columns, e.g. ('task',)")


SETTINGS = {NEURAL_TESTBED: NeuralTestbedSettings, OBSERVATIONS: PerCellSettings,
            REGRET: PerCellSettings}  # fmt: skip


def settings_type(rule: Any) -> type | None:
    """The settings type of `rule`: a built-in rule's name, or a rule object's
    `settings_type` (None: the rule takes no settings)."""
    kind = SETTINGS[rule] if isinstance(rule, str) else getattr(rule, "settings_type", None)
    if kind is not None and not dataclasses.is_dataclass(kind):
        raise bad_value("rule settings_type", kind, "a dataclass type, or None")
    return kind


def rule_settings(rule: Any, given: Any, fields: dict[str, Any]) -> Any:
    """The settings object of a declaration of `rule`: `given` (a settings object, or
    None: the defaults) with the keyword `fields` replaced; a field the rule has no
    setting for is an InputError naming it and the rule's settings."""
    kind = settings_type(rule)
    said = rule if isinstance(rule, str) else getattr(rule, "name", type(rule).__name__)
    allowed = [f.name for f in dataclasses.fields(kind)] if kind is not None else []
    for field, value in fields.items():
        if field not in allowed:
            takes = f"the settings of rule {said!r}: " + (", ".join(allowed) or "none")
            raise bad_value(f"ranked_by {field}", value, takes)
    if kind is None:
        if given is not None:
            raise bad_value("ranked_by settings", given, f"None (rule {said!r} takes none)")
        return None
    if given is not None and not isinstance(given, kind):
        raise bad_value("ranked_by settings", given, f"a {kind.__name__} (rule {said!r})")
    return dataclasses.replace(given, **fields) if given is not None else kind(**fields)


@dataclasses.dataclass(frozen=True, init=False)
class RankedBy:
    """What a family's problems are ranked on, and how (see the module doc).

    `score`: the metric column; `name`: what it is, as titles say it (`joint KL`);
    `short`: the suffix of the score's columns (`mean_<short>`; None: the rule's default,
    else `score`); `rule`: the name of a built-in rule (`RULES`) or a rule object of the
    family's own (`leaderboard.ranking.rules.Rule`: its tables, columns, titles and plots);
    `lower_is_better`: the direction; `note`: the report's sentence on the family's
    tables; `shipped`: the name of our own shipped runs of the family's problems, ranked
    beside a user's (`leaderboard.ranking.shipped`). Any other keyword is a setting of the
    rule (`settings`: its settings object; `settings=` takes one whole, as
    `dataclasses.replace` passes it). A setting reads through the declaration too:
    `spec.normalizer` is `spec.settings.normalizer`.
    """

    score: str
    name: str
    short: str | None = None
    rule: Any = NEURAL_TESTBED  # a name of RULES, or a leaderboard.ranking.rules.Rule
    lower_is_better: bool = True
    note: str = ""
    shipped: str | None = None
    settings: Any = None  # the rule's settings object (None: the rule takes none)

    def __init__(self, score: str, name: str, short: str | None = None,
                 rule: Any = NEURAL_TESTBED, *, lower_is_better: bool = True, note: str = "",
                 shipped: str | None = None, settings: Any = None, **rule_fields: Any):  # fmt: skip
        if isinstance(rule, str):
            rule = ALIASES.get(rule, rule)
            if rule not in RULES:
                raise bad_value("ranked_by rule", rule, RULES)
        settings = rule_settings(rule, settings, rule_fields)
        if short is None:
            short = getattr(type(settings), "default_short", None) or score
        for field, value in dict(score=score, name=name, short=short, rule=rule,
                                 lower_is_better=lower_is_better, note=note, shipped=shipped,
                                 settings=settings).items():  # fmt: skip
            object.__setattr__(self, field, value)

    def __getattr__(self, field: str) -> Any:
        """A setting of the rule, read through the declaration (`spec.normalizer`)."""
        settings = self.__dict__.get("settings")  # (not set while unpickling)
        if field.startswith("_") or settings is None or not hasattr(settings, field):
            raise AttributeError(f"{type(self).__name__!r} has no attribute {field!r} (nor "
                                 f"has its rule's settings: {settings!r})")  # fmt: skip
        return getattr(settings, field)

    def title(self, part: Any = None) -> str:
        """What a table of this family at `part` (its rule's table key) scores."""
        said = getattr(self.settings, "title", None)
        return said(self.name, part) if said is not None else self.name


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


def c2st(cell: tuple[str, ...], **more) -> RankedBy:
    """Ranked on C2ST (0.5 = perfect) by the observations rule over `cell`; unnormalised;
    `more`: the other fields (`replicate`, `published`, `note`, ...)."""
    return RankedBy(rule=OBSERVATIONS, score="c2st", name="C2ST", short="c2st", cell=cell, **more)


def regret(cell: tuple[str, ...], replicate: str) -> RankedBy:
    """Ranked on average regret per step (lower first) by the regret rule: the mean over
    the `replicate`s (bandit seeds) per `cell` with a bootstrap interval; unnormalised."""
    return RankedBy(
        rule=REGRET,
        score="average_regret",
        name="average regret",
        short="regret",
        cell=cell,
        replicate=replicate,
        note=(
            "Average regret per step of the agent as a Thompson sampler (best reward "
            "probability - chosen one; 0 = always the best action); uniform is the floor a "
            "learning agent must beat, a greedy mlp the trap of acting on a point estimate."
        ),
    )
