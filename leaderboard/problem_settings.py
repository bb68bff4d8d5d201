"""Problem settings beside result rows: each problem id's `generative.problem_settings`,
joined as columns to a results DataFrame.

Neither execution nor ranking: the loading of a results file
(`leaderboard.execution.results`) and the ranking of shipped runs and sweeps read settings
through here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from testbed.errors import InputError


def settings_table(problem_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """`generative.problem_settings` for each id; ids no longer registered get none."""
    import generative

    out = {}
    for pid in problem_ids:
        try:
            out[pid] = generative.problem_settings(pid)
        except InputError:
            out[pid] = {}
    return out


def join_settings(df):
    """`df` (results rows, `leaderboard.rows.to_dataframe`) with its problems' settings as
    columns after its own; a setting whose name clashes with a column of `df` is joined
    as `setting_<name>`."""
    settings = settings_table(sorted(set(df["problem_id"])))
    taken = set(df.columns)
    names = sorted({k for s in settings.values() for k in s})
    for name in names:
        column = f"setting_{name}" if name in taken else name
        df[column] = [settings[p].get(name) for p in df["problem_id"]]
    return df
