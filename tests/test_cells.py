"""A reproduction's cells run through the library's sweep driver (`experiments.cells`):
stored cells are skipped, a failure is stored with its reason in one line, a cell another
run holds is left to it and waited for, and the cells see the reproduction's settings."""

from __future__ import annotations

import dataclasses
import functools
import logging

from experiments.cells import CellJob, run_cells
from leaderboard.store import CLAIMED, ResultsStore

log = logging.getLogger("testbed.test_cells")


@dataclasses.dataclass(frozen=True)
class Cell:
    name: str
    size: int = 1

    @property
    def key(self) -> str:
        return f"test/{self.name}"


def _compute(name: str, ran: list[str], fail: set[str]) -> dict[str, float]:
    ran.append(name)
    if name in fail:
        raise ValueError(f"{name} broke\non two lines")
    return {"value": float(len(name))}


def _jobs(names, ran: list[str], fail=()) -> list[CellJob]:
    return [
        CellJob(Cell(n), functools.partial(_compute, n, ran, set(fail)), "diag", "kind", f"p/{n}")
        for n in names
    ]


def _rows(db: str) -> dict[str, dict]:
    with ResultsStore(db, "r") as store:
        return {r["key"]: r for r in store.rows(tracebacks=True)}


def test_stored_cells_are_skipped_and_a_failure_is_stored_with_its_reason(tmp_path):
    db, ran = str(tmp_path / "r.db"), []
    assert run_cells(_jobs(["x", "yy"], ran, fail={"yy"}), db, log) == 1
    rows = _rows(db)
    assert rows["test/x"]["status"] == "ok" and rows["test/x"]["metrics"] == {"value": 1.0}
    x = rows["test/x"]
    assert (x["agent"], x["config_key"], x["problem_id"]) == ("diag", "kind", "p/x")
    assert '"size": 1' in x["config"] and '"python"' in x["versions"]  # the cell's fields
    assert rows["test/yy"]["error"] == "ValueError: yy broke on two lines"
    assert "Traceback" in rows["test/yy"]["traceback"]
    assert run_cells(_jobs(["x", "yy"], ran, fail={"yy"}), db, log, rerun_failed=False) == 0
    assert ran == ["x", "yy"]  # nothing ran again
    assert run_cells(_jobs(["x", "yy"], ran), db, log) == 0  # a failed cell runs again
    assert ran == ["x", "yy", "yy"] and _rows(db)["test/yy"]["status"] == "ok"


def test_a_cell_another_run_holds_is_left_to_it_and_waited_for(tmp_path):
    db, ran = str(tmp_path / "r.db"), []
    with ResultsStore(db, "w") as other:  # another run on the same store
        assert other.claim("test/x", seconds=None) == CLAIMED
        row = {"key": "test/x", "agent": "diag", "config_key": "kind", "config": {},
               "problem_id": "p/x", "seed": 0, "status": "ok",
               "metrics": {"value": 9.0}}  # fmt: skip

        def yy_while_the_other_finishes_x() -> dict[str, float]:
            ran.append("yy")
            other.record(row)
            return {"value": 2.0}

        x = _jobs(["x"], ran)[0]
        yy = CellJob(Cell("yy"), yy_while_the_other_finishes_x, "diag", "kind", "p/yy")
        assert run_cells([x, yy], db, log) == 0
    assert ran == ["yy"] and _rows(db)["test/x"]["metrics"] == {"value": 9.0}


def test_a_lease_that_ended_is_taken_over(tmp_path):
    db, ran = str(tmp_path / "r.db"), []
    with ResultsStore(db, "w") as other:
        assert other.claim("test/x", seconds=-1.0) == CLAIMED  # its lease has ended
        assert run_cells(_jobs(["x"], ran), db, log) == 0
    assert ran == ["x"]


def test_cells_run_under_the_settings_of_the_reproduction(tmp_path):
    """Its checkpoints folder (the trainings it keeps), not the driver's 'off'."""
    from testbed import settings
    from testbed.checkpoints import beside_store

    seen = []

    def compute() -> dict[str, float]:
        seen.append(settings.current().checkpoints)
        return {"value": 1.0}

    db = tmp_path / "r.db"
    with beside_store(db):
        assert run_cells([CellJob(Cell("x"), compute, "diag", "kind", "p/x")], str(db), log) == 0
    assert seen == [db.with_name("r.db.checkpoints").resolve()]
