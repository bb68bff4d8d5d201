"""A results file's leaderboard: its rows loaded (execution: the store) and ranked
(ranking: the board). The one module where the two sides meet; neither imports the other."""

from __future__ import annotations

import os
from typing import Any

from leaderboard.execution.results import load
from leaderboard.ranking.board import rank
from leaderboard.ranking.standings import Board
from leaderboard.store import DEFAULT_PATH


def build(results: str | os.PathLike | None = DEFAULT_PATH, **options: Any) -> Board:
    """Loads `results` and ranks it (`leaderboard.ranking.board.rank`'s options);
    `results=None` ranks our shipped runs of `sweep`'s problems alone."""
    df = None if results is None else load(results)
    return rank(df, results=results, **options)
