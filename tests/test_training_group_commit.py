"""A training group (jobs that share one training, e.g. a tau pair) is committed as one
transaction (issue 48, reproduction 6): a driver killed between the group's two rows
stored one of them, and the re-run trained the other alone (its row without
`shared_training`, with a full training time)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SWEEP = """
import os, sys
sys.path.insert(0, {root!r})
from generative.registry import FAMILIES, register_family
from leaderboard.execution.executors import InlineExecutor
from leaderboard.execution.jobs import expand
from leaderboard.execution.runner import run_sweep
from leaderboard.store import ResultsStore
from testbed.base import SHARED_BY_ANY, Data, PriorKnowledge, Quality


class Pair:
    training_key = "pair"
    training_shared_by = SHARED_BY_ANY
    train_data = Data(x=[[0.0]], y=[0])
    prior_knowledge = PriorKnowledge(input_dim=1, num_train=1, num_classes=2)

    def __init__(self, tau):
        self.tau = tau

    def evaluate(self, predictive):
        return Quality(kl_estimate=0.1 * self.tau)


@register_family("pairtest", lambda rest: {{"tau": int(rest)}}, training_key=lambda s: "pair",
                 training_shared_by=SHARED_BY_ANY)
def build(settings):
    return Pair(settings["tau"])


db, kill = sys.argv[1], sys.argv[2] == "kill"
store = ResultsStore(db)
inserts = []


def trace(statement):  # the driver dies as the group's second row is being stored
    if statement.lstrip().upper().startswith("INSERT INTO RESULTS"):
        inserts.append(statement)
        if kill and len(inserts) == 2:
            os._exit(9)


store._conn.set_trace_callback(trace)
run_sweep(expand(["uniform"], ["pairtest/1", "pairtest/10"]), store, InlineExecutor())
store.close()
"""


def _sweep(db: Path, kill: bool) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", SWEEP.format(root=str(ROOT)), str(db), "kill" if kill else "-"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    return proc.returncode


def _stored(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT problem_id, metrics FROM results").fetchall()
    conn.close()
    return dict(rows)


def test_a_kill_between_a_groups_rows_stores_all_of_it_or_none(tmp_path):
    db = tmp_path / "r.db"
    assert _sweep(db, kill=True) == 9  # killed while storing the group
    assert len(_stored(db)) in (0, 2)  # never a part of the group
    assert _sweep(db, kill=False) == 0  # the re-run
    rows = _stored(db)
    assert sorted(rows) == ["pairtest/1", "pairtest/10"]
    for metrics in rows.values():  # both from one training
        assert '"shared_training": 2' in metrics, metrics
