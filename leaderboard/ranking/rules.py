"""Ranking rules as objects: how the rows of the families declaring a rule become ranking
tables, and what those tables show and say.

A family declares its rule in its `testbed.ranking.RankedBy` (`rule=`): the name of a
registered rule (`testbed`: the Neural Testbed's; `observations`: the SBI benchmark's) or
a `Rule` object of its own. The board and the report loop over the rules present and call
these methods; they name no rule, score or column of a family.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from testbed.errors import bad_value
from testbed.ranking import RankedBy

# A `leaderboard.ranking.standings.Ranking` and `Board` (standings imports this module, so
# their names are not imported here)
Ranking = Board = Any


@dataclasses.dataclass(frozen=True)
class Scope:
    """What the rules rank within: the sweep's problem ids (None: whatever ran), one tau
    (None: every tau), the normaliser asked for, best config per agent only, the runs one
    by one, the published rows beside, and the labels of every agent config present."""

    ids: Sequence[str] | None
    tau: int | None
    normalize: str | None
    best_only: bool
    per_observation: bool
    published: bool
    labels: Mapping[str, str]


@dataclasses.dataclass
class Ranked:
    """What a rule made of its families' rows: the rankings, the cleaned rows of each
    family (for plots and notes), the runs one by one, and every tau present."""

    rankings: list[Ranking] = dataclasses.field(default_factory=list)
    clean: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    per_observation: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    taus: set[int] = dataclasses.field(default_factory=set)


class Rule:
    """A ranking rule. Subclasses set the attributes and override `rank`; the rest has
    defaults a simple rule keeps (one table per family, shown columns, no plots).

    `name`: the registry key a family may declare; `metric`: the `--metric` choice that
    keeps only this rule's tables; `normalised`: its tables can be normalised by an agent;
    `over_observations`: a table per family over observations (no tau);
    `note`: the report's sentence under each of its sections; `column_help`: what its own
    columns mean; `optional`: columns not shown where no problem reports them;
    `terminal_legend`: its columns the terminal explains under the tables."""

    name: str = ""
    metric: str = ""
    normalised: bool = False
    over_observations: bool = False
    note: str = ""
    column_help: Mapping[str, str] = {}
    optional: tuple[str, ...] = ()  # columns left out of a table where all are blank
    terminal_legend: tuple[str, ...] | None = None  # columns explained under the terminal's
    # tables besides the shared ones (None: those of `column_help`)

    def rank(self, df: pd.DataFrame, specs: Mapping[str, RankedBy], scope: Scope) -> Ranked:
        """The rankings of the families `specs` (all declaring this rule) in `df`."""
        raise NotImplementedError(f"rule {self.name!r}: a Rule subclass overrides rank()")

    def columns(self, spec: RankedBy) -> list[str]:
        """The columns a table of this rule shows, in order."""
        return ["rank", "label", f"mean_{spec.short}"]

    def per_observation_columns(self, spec: RankedBy) -> list[str]:
        """The columns of a family's runs one by one (a rule with none: none)."""
        return []

    def title(self, ranking: Ranking, shared: bool) -> str:
        """A table's title; `shared`: other families' tables share its section."""
        said = ranking.spec.title(ranking.tau)
        return f"{said} on {ranking.family}" if shared else said

    def table_title(self, ranking: Ranking, title: str) -> str:
        """The report's heading of a table, from its family-and-tau `title`."""
        return title

    def table_extras(self, board: Board, ranking: Ranking) -> list[str]:
        """HTML the report shows after a table (plots of this table, its runs)."""
        return []

    def section_plots(self, board: Board, spec: RankedBy, rankings: list[Ranking],
                      norm: str | None, phrase: str, name: str) -> list[str]:  # fmt: skip
        """HTML figures the report shows at the end of a section of this rule."""
        return []


RULES: dict[str, Rule] = {}


def _check_named(rule: Rule) -> Rule:
    if not rule.name or not rule.metric:
        raise bad_value("rule name and metric", (rule.name, rule.metric), "non-empty strings")
    return rule


def register_rule(rule: Rule) -> Rule:
    """Registers a built-in rule under its name (the names `testbed.ranking.RULES` lets a
    family declare); a family's own rule is declared as the object itself."""
    RULES[rule.name] = _check_named(rule)
    return rule


def rule_of(spec: RankedBy) -> Rule:
    """The rule a family declares: a registered rule's name, or a `Rule` object."""
    if isinstance(spec.rule, Rule):
        return _check_named(spec.rule)
    if spec.rule not in RULES:
        raise bad_value("ranked_by rule", spec.rule, sorted(RULES))
    return RULES[spec.rule]


def metrics() -> list[str]:
    """The `--metric` choices: one per registered rule."""
    return list(dict.fromkeys(rule.metric for rule in RULES.values()))


def by_rule(specs: Mapping[str, RankedBy]) -> list[tuple[Rule, dict[str, RankedBy]]]:
    """The families `specs` grouped by their rule, rules in the order first declared."""
    out: dict[int, tuple[Rule, dict[str, RankedBy]]] = {}
    for family, spec in specs.items():
        rule = rule_of(spec)
        out.setdefault(id(rule), (rule, {}))[1][family] = spec
    return list(out.values())


def legend_columns(spec: RankedBy | None) -> tuple[str, ...]:
    """The columns of `spec`'s rule the terminal explains besides the shared ones."""
    if spec is None:
        return ()
    rule = rule_of(spec)
    return tuple(rule.column_help) if rule.terminal_legend is None else rule.terminal_legend


def help_of(column: str, spec: RankedBy | None) -> str | None:
    """What `column` means in a table of `spec`'s rule (None: the rule does not say)."""
    if spec is None:
        return None
    paper = dict(getattr(spec.published, "column_help", ()))  # the paper's columns
    return paper.get(column, rule_of(spec).column_help.get(column))
