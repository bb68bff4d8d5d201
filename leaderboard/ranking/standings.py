"""The ranking's data: one `Ranking` per table, the `Board` holding them with the rows
they came from, and the small readings of a table every rule and view shares."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd

from leaderboard.ranking.rules import Rule, rule_of
from leaderboard.ranking.scoring import SHIPPED_LABEL
from testbed.ranking import RankedBy

SHIPPED_SUFFIX = SHIPPED_LABEL.format(agent="")  # " (ours, shipped)"
PAPER_SUFFIX = " paper)"  # how a published row's label ends (`literature.PAPER_LABEL`)


@dataclasses.dataclass
class Ranking:
    """One ranking table: the problems of one family (at one `part`, the key its rule's
    tables are per, named by the rule's `part_name`; None: one table a family), ranked as
    the family declares (`spec`)."""

    spec: RankedBy
    family: str
    part: Any
    table: pd.DataFrame
    # the configs that ran part of the ranked problems, each scored over those it ran (not
    # ranked with the table's; a `coverage` column says how many they ran)
    partial: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)

    @property
    def rule(self) -> Rule:
        """The rule that made this table."""
        return rule_of(self.spec)

    @property
    def coverage(self) -> dict[str, int]:
        """label -> problems run, of each config that ran part of the problems here."""
        return dict(self.table.attrs.get("partial_coverage", {}))

    @property
    def observations(self) -> bool:
        """Ranked per cell over observations (one table a family, never normalised)."""
        return self.rule.over_observations


@dataclasses.dataclass
class Board:
    """The loaded results and the tables derived from them: one ranking per family and
    part (its rule's table key, or one a family), in the order families registered."""

    df: pd.DataFrame  # the rows that count: all of the results, or the sweep's problems
    problem_ids: list[str] | None  # the sweep's problem ids (None: whatever ran)
    rankings: list[Ranking]
    clean: dict[str, pd.DataFrame]  # family -> its cleaned rows (of a rule that keeps them)
    results: str | None = None  # the results file they came from
    per_observation: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    sweep: str | None = None
    # shipped agent configs left out: the user's results hold all their jobs: agent -> jobs
    shipped_held: dict[str, int] = dataclasses.field(default_factory=dict)
    # ranked families whose shipped source (named by the family) holds none of the
    # problems ranked: family -> source
    shipped_none: dict[str, str] = dataclasses.field(default_factory=dict)
    imports: tuple[str, ...] = ()  # the user's modules (--import): the notes' commands name them

    def tables_of(self, family: str) -> dict[Any, pd.DataFrame]:
        """A family's ranking tables by their part (None: one table a family)."""
        return {r.part: r.table for r in self.rankings if r.family == family}

    def families(self) -> list[str]:
        """The ranked families, in display order."""
        return list(dict.fromkeys(r.family for r in self.rankings))

    def sections(self) -> list[tuple[RankedBy, list[Ranking]]]:
        """The rankings grouped by what they score (families ranked alike, e.g. two sweeps
        ranked on the joint KL, share a section), in display order."""
        out: dict[str, tuple[RankedBy, list[Ranking]]] = {}
        for r in self.rankings:
            out.setdefault(r.spec.name, (r.spec, []))[1].append(r)
        return list(out.values())

    def observed(self) -> pd.DataFrame | None:
        """The tables of the families ranked over observations, in one (family column)."""
        parts = [r.table.assign(family=r.family) for r in self.rankings if r.observations]
        return pd.concat(parts, ignore_index=True) if parts else None

    @property
    def num_failed(self) -> int:
        """Failed jobs among the rows that count."""
        return int((self.df["status"] == "failed").sum())


def whose(labels: pd.Series) -> pd.Series:
    """'yours' for a user's row, 'shipped' for our shipped runs, 'published' for a
    paper's (`<ALGORITHM> (sbibm paper)`)."""

    def kind(label: object) -> str:
        text = str(label)
        if text.endswith(SHIPPED_SUFFIX):
            return "shipped"
        return "published" if text.endswith(PAPER_SUFFIX) else "yours"

    return pd.Series([kind(v) for v in labels], index=getattr(labels, "index", None), dtype=object)
