"""Ranking: a results DataFrame and the families' declarations -> ranking tables, legends
and the HTML report; imports nothing of execution (tests/test_architecture.py) and needs
no store.

Offered here: `rank` (a DataFrame -> a `Board` of `Ranking`s, one per family and table),
`Rule` and `register_rule` (a family's own ranking rule), `published` (a reference's
published results). The modules, one thing each:

- board: `rank`, and the terminal tables and legend of a board; standings: `Board`,
  `Ranking`;
- rules: the rule interface and its registry; the built-in rules, registered when
  `leaderboard` is imported: rule_neural_testbed (the Neural Testbed's: a table per
  tau), rule_per_cell (the SBI benchmark's: per cell over observations), rule_regret (the
  bandit's: per cell, on regret); scoring (what every rule reads alike),
  scoring_neural_testbed and scoring_per_cell (the two rules' scores);
- legend, notes, tables: the legend the rules' lines make, the notes under the tables,
  their text forms (a rule owns its columns' headers, help and figures: `Rule`);
- report (`testbed report`), html, plots: the HTML report and its figures;
- literature (published results), shipped (our shipped runs): the rows shown beside.
"""

from leaderboard.ranking.board import rank
from leaderboard.ranking.literature import published
from leaderboard.ranking.rules import Rule, register_rule
from leaderboard.ranking.standings import Board, Ranking

__all__ = ["Board", "Ranking", "Rule", "published", "rank", "register_rule"]
