"""Ranking rules as objects: how the rows of the families declaring a rule become ranking
tables, and what those tables show and say.

A family declares its rule in its `testbed.ranking.RankedBy` (`rule=`): the name of a
registered rule (`neural_testbed`: the Neural Testbed's; `observations`: the SBI
benchmark's) or a `Rule` object of its own. A rule owns its presentation: its tables'
columns, their headers and legend lines, titles, notes and figures, and what its tables
are per (`part_name`). The board and the report loop over the rules present and call
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
    """What the rules rank within: the sweep's problem ids (None: whatever ran), the table
    keys asked for (`only`: a rule's `part_name` -> the one key of its tables to keep), the
    normaliser asked for, best config per agent only, the runs one by one, the published
    rows beside, and the labels of every agent config present."""

    ids: Sequence[str] | None
    only: Mapping[str, Any]
    normalize: str | None
    best_only: bool
    per_observation: bool
    published: bool
    labels: Mapping[str, str]

    def part_of(self, rule: Rule) -> Any:
        """The one table key asked of `rule`'s tables (None: every key)."""
        return self.only.get(rule.part_name) if rule.part_name else None


@dataclasses.dataclass
class Ranked:
    """What a rule made of its families' rows: the rankings, the cleaned rows of each
    family (for plots and notes), the runs one by one, and every table key present."""

    rankings: list[Ranking] = dataclasses.field(default_factory=list)
    clean: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    per_observation: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    parts: set[Any] = dataclasses.field(default_factory=set)


class Rule:
    """A ranking rule. Subclasses set the attributes and override `rank`; the rest has
    defaults a simple rule keeps (one table per family, shown columns, no plots).

    `name`: the registry key a family may declare; `metric`: the `--metric` choice that
    keeps only this rule's tables; `settings_type`: the dataclass of the settings its
    declarations give (`RankedBy(..., field=value)`; None: none); `part_name`: what its
    tables are per within a family (a ranking's `part`; a keyword of `rank` keeps one;
    None: one table a family); `normalised`: its tables can be normalised by an agent;
    `over_observations`: a table per family over observations; `note`: the report's
    sentence under each of its sections; `column_help`: what its own columns mean;
    `short_names`: its columns' headers; `optional`: columns not shown where no problem
    reports them; `terminal_legend`: the column patterns (`mean_*`) the terminal explains
    under its tables, in order (None: rank, those of `column_help`, coverage, whose);
    `figures`: its public functions that draw figures and their data (importable from
    `leaderboard.ranking.report` too); `shared_training`, `evaluation`: how its problems
    share a training and what a job's evaluation computes, as the runtimes' legend says."""

    name: str = ""
    metric: str = ""
    settings_type: type | None = None
    part_name: str | None = None
    normalised: bool = False
    over_observations: bool = False
    note: str = ""
    column_help: Mapping[str, str] = {}
    short_names: Mapping[str, str] = {}
    optional: tuple[str, ...] = ()  # columns left out of a table where all are blank
    terminal_legend: tuple[str, ...] | None = None
    figures: tuple[str, ...] = ()
    shared_training: str = ""
    evaluation: str = ""

    def rank(self, df: pd.DataFrame, specs: Mapping[str, RankedBy], scope: Scope) -> Ranked:
        """The rankings of the families `specs` (all declaring this rule) in `df`."""
        raise NotImplementedError(f"rule {self.name!r}: a Rule subclass overrides rank()")

    def check_part(self, part: Any) -> None:
        """Refuses a table key asked for (`rank(<part_name>=...)`) that cannot be one."""

    def columns(self, spec: RankedBy) -> list[str]:
        """The columns a table of this rule shows, in order."""
        return ["rank", "label", f"mean_{spec.short}"]

    def per_observation_columns(self, spec: RankedBy) -> list[str]:
        """The columns of a family's runs one by one (a rule with none: none)."""
        return []

    def per_observation_title(self, spec: RankedBy, family: str) -> str:
        """The title of a family's runs one by one."""
        return f"{spec.name} per observation on {family}"

    def title(self, ranking: Ranking, shared: bool) -> str:
        """A table's title; `shared`: other families' tables share its section."""
        said = ranking.spec.title(ranking.part)
        return f"{said} on {ranking.family}" if shared else said

    def table_title(self, ranking: Ranking, title: str) -> str:
        """The report's heading of a table, from its family's `title`."""
        return title

    def section_name(self, spec: RankedBy, rankings: list[Ranking]) -> tuple[str, str]:
        """What a report section of `rankings` scores, and over what ('' when it says
        nothing more): its heading is '<name>: <over>'."""
        return spec.name, ""

    def section_notes(self, spec: RankedBy, rankings: list[Ranking]) -> list[str]:
        """Lines the report says under a section's heading, besides the notes."""
        return []

    def coverage_notes(self, board: Board, rankings: list[Ranking]) -> list[str]:
        """Lines said under a family's `rankings` of what they leave out or rank apart."""
        return []

    def help(self, column: str, spec: RankedBy) -> str | None:
        """What `column` means in a table of `spec` (None: the rule does not say)."""
        if column in self.column_help:
            return self.column_help[column]
        if column in (f"mean_{spec.short}", spec.short):
            better = "lower" if spec.lower_is_better else "higher"
            return f"mean {spec.name} over the problems; {better} is better"
        return None

    def normalised_help(self, text: str, column: str, normalizer: str | None) -> str:
        """`column`'s help in a table normalised by `normalizer` (None: not normalised)."""
        return text

    def header(self, column: str) -> str | None:
        """`column`'s short header (None: the rule does not name it)."""
        return self.short_names.get(column)

    def legend_name(self, column: str, spec: RankedBy) -> str | None:
        """How the terminal's legend names `column` (None: by its header)."""
        return None

    def legend_patterns(self, spec: RankedBy) -> tuple[str, ...]:
        """The column patterns the terminal's legend explains under its tables, in order."""
        if self.terminal_legend is not None:
            return (*self.terminal_legend, spec.short)
        return ("rank", *self.column_help, "coverage", "whose", spec.short)

    def shown_columns(self, spec: RankedBy, apart: bool = False) -> list[str]:
        """The columns of a table (`apart`: of its configs that ran part of the problems:
        no rank, their coverage after the label)."""
        columns = self.columns(spec)
        if apart:
            columns = [c for c in columns if c != "rank"]
            columns.insert(columns.index("label") + 1, "coverage")
        return columns

    def shown(self, table: pd.DataFrame, ranking: Ranking, apart: bool = False) -> pd.DataFrame:
        """A table as the terminal shows it: its columns, blank optional ones left out."""
        shown = table[[c for c in self.shown_columns(ranking.spec, apart) if c in table.columns]]
        return self.cells(drop_blank(shown, self.optional))

    def report_columns(self, ranking: Ranking) -> list[str]:
        """The columns of a table in the report."""
        return [c for c in self.columns(ranking.spec) if c in ranking.table.columns]

    def cells(self, table: pd.DataFrame) -> pd.DataFrame:
        """A table's cells as shown (e.g. a blank saying why it is blank)."""
        return table

    def partial_title(self, title: str, ranking: Ranking) -> str:
        """The title of a table of configs that ran part of the problems (`title`: the
        table's)."""
        norm = ranking.table.attrs.get("normalizer")
        scale = f", normalised by {norm}'s mean on the same problems" if norm else ""
        return (
            f"{title}: configs that ran part of the problems, each scored over those it "
            f"ran{scale}; not ranked with the table above"
        )

    def partial_note(self, ranking: Ranking) -> str:
        """The report's note above a table of configs that ran part of the problems."""
        norm = ranking.table.attrs.get("normalizer")
        scale = f", normalised by {norm}'s mean on the same problems" if norm else ""
        return (
            "Apart: agent configs that ran part of these problems, each scored over those it "
            f"ran{scale}; not ranked with the table above."
        )

    def table_extras(self, board: Board, ranking: Ranking) -> list[str]:
        """HTML the report shows after a table (plots of this table, its runs)."""
        return []

    def section_plots(self, board: Board, spec: RankedBy, rankings: list[Ranking],
                      norm: str | None, phrase: str, name: str) -> list[str]:  # fmt: skip
        """HTML figures the report shows at the end of a section of this rule."""
        return []


def drop_blank(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """`table` without those of `columns` that are blank in every row."""
    return table.drop(columns=[c for c in columns if c in table and table[c].isna().all()])


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


def by_rule(specs: Mapping[str, RankedBy]) -> list[tuple[Rule, dict[str, RankedBy]]]:
    """The families `specs` grouped by their rule, rules in the order first declared."""
    out: dict[int, tuple[Rule, dict[str, RankedBy]]] = {}
    for family, spec in specs.items():
        rule = rule_of(spec)
        out.setdefault(id(rule), (rule, {}))[1][family] = spec
    return list(out.values())


def said_by_rules(attribute: str) -> str:
    """What the registered rules say as `attribute` (e.g. `shared_training`), '; '-joined
    ('' when none says anything)."""
    return "; ".join(dict.fromkeys(s for r in RULES.values() if (s := getattr(r, attribute))))
