"""`--ship` merges a store's cells into our shipped runs (issue 57: one small run's
`--ship` replaced the 531 shipped L-C2ST cells with its own, and 855 WYB cells became 2):
every cell shipped before stays, and a cell the store holds ends with the store's values."""

from __future__ import annotations

import dataclasses
import gzip
import shutil

import pytest

from experiments import lc2st_report, wyb_report
from testbed.errors import InputError


def _cells(frame, keys) -> set[tuple]:
    return set(frame[keys].itertuples(index=False, name=None))


def _record(path, rows) -> None:
    """Writes hand-made finished rows (cell, config, metrics) in the store's form."""
    from leaderboard.store import ResultsStore

    with ResultsStore(str(path), "w") as store:
        for cell, config, metrics in rows:
            store.record({
                "key": cell.key, "agent": "a", "config_key": "c", "config": config,
                "problem_id": "p", "seed": 0, "status": "ok", "metrics": metrics,
                "wall_seconds": 1.0,
            })  # fmt: skip


def _lc2st_row(cell, p_sbi: float):
    """An L-C2ST cell's row with the paper's sizes and `p_sbi` at observations 1 and 2."""
    config = {**dataclasses.asdict(cell), "num_trials_null": cell.null_trials}
    metrics = {f"mse/{f}/{k}": p_sbi for f in ("T", "p_sbi", "p_exact") for k in (1, 2)}
    return cell, config, metrics


def test_lc2st_ship_keeps_every_shipped_cell_and_takes_the_stores(tmp_path, capsys):
    from experiments.reproduce_lc2st import Cell, main

    keys = lc2st_report.CELL_FIELDS
    path = tmp_path / "lc2st_ours.csv.gz"
    shutil.copy(lc2st_report.SHIPPED, path)
    before = lc2st_report.read_shipped(path)
    again = Cell(**before[keys].to_dict("records")[0])  # a shipped cell, run again
    fresh = Cell("level", "two_moons", 0, 10_000, 99, "lc2st")  # shipped by nobody
    assert dataclasses.astuple(again) in _cells(before, keys)
    assert dataclasses.astuple(fresh) not in _cells(before, keys)
    db = tmp_path / "mine.db"
    _record(db, [_lc2st_row(again, 0.123), _lc2st_row(fresh, 0.5)])

    args = ["--report", "--results", str(db), "--out", str(tmp_path / "o"), "--ship", str(path)]
    assert main(args) == 0
    after = lc2st_report.read_shipped(path)
    n = len(_cells(before, keys))
    assert _cells(after, keys) == _cells(before, keys) | {dataclasses.astuple(fresh)}
    said = f"{path}: {n + 1} cells (2 from {db}, {n - 1} kept)"
    assert said in capsys.readouterr().err.splitlines()
    mine = after[[c == dataclasses.astuple(again) for c in after[keys].itertuples(
        index=False, name=None)]]  # fmt: skip
    assert set(mine["p_sbi"]) == {0.123} and sorted(mine["obs"]) == [1, 2]
    untouched = before[[c != dataclasses.astuple(again) for c in before[keys].itertuples(
        index=False, name=None)]]  # fmt: skip
    assert len(after) == len(untouched) + 4  # one statistic at 2 observations, twice


def test_wyb_ship_keeps_every_shipped_cell_and_takes_the_stores(tmp_path):
    from experiments.reproduce_wyb import Cell

    path = tmp_path / "wyb_ours.csv.gz"
    shutil.copy(wyb_report.SHIPPED, path)
    before = wyb_report.read_shipped(path)
    again = Cell(**before[wyb_report.CELL].to_dict("records")[0])  # a shipped cell, run again
    fresh = Cell("matched", 1, "exact", 99)
    db = tmp_path / "wyb.db"
    rows = [(c, dataclasses.asdict(c), {"wyb_kl": kl}) for c, kl in ((again, 9.5), (fresh, 1.5))]
    _record(db, rows)

    said = wyb_report.ship(str(db), path)
    after = wyb_report.read_shipped(path)
    n = len(_cells(before, wyb_report.CELL))
    assert said == f"{path}: {n + 1} cells (2 from {db}, {n - 1} kept)"
    assert _cells(after, wyb_report.CELL) == _cells(before, wyb_report.CELL) | {
        dataclasses.astuple(fresh)
    }
    by_cell = after.set_index(wyb_report.CELL)
    assert by_cell.loc[dataclasses.astuple(again), "wyb_kl"] == 9.5
    assert by_cell.loc[dataclasses.astuple(fresh), "wyb_kl"] == 1.5
    others = before.set_index(wyb_report.CELL).drop(index=[dataclasses.astuple(again)])
    assert (by_cell.loc[others.index, "wyb_kl"] == others["wyb_kl"]).all()  # kept as shipped
    with gzip.open(path, "rt") as f:
        assert f.readline().startswith("# Our runs")  # with its provenance


def test_a_store_with_no_finished_cell_ships_nothing(tmp_path):
    """Shipping an empty store is refused in one line (it wrote an empty file)."""
    from leaderboard.store import ResultsStore

    path = tmp_path / "lc2st_ours.csv.gz"
    shutil.copy(lc2st_report.SHIPPED, path)
    db = tmp_path / "empty.db"
    with ResultsStore(str(db), "w"):
        pass
    with pytest.raises(InputError, match="--results: .* holds no finished cell to ship"):
        lc2st_report.ship(str(db), path)
    assert path.read_bytes() == lc2st_report.SHIPPED.read_bytes()
