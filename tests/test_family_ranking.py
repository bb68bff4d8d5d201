"""Families own their ranking: a family with a score of its own ranks in `testbed
leaderboard` and the report with no change in `leaderboard/`, and nothing there names a
family."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import generative

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "my_ranked_family.py"


def _testbed(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args],
        capture_output=True, text=True, timeout=900, cwd=cwd,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def test_a_family_with_its_own_score_ranks_in_leaderboard_and_report(tmp_path):
    results, report = tmp_path / "r.db", tmp_path / "r.html"
    imports = ["--import", str(EXAMPLE)]
    ids = "brier_2d/2,brier_2d/3"  # n = 10 and 30 at T = 0.1
    run = _testbed("sweep", "--agent", "uniform,mlp", "--problem", ids, "--executor",
                   "inline", "--results", str(results), "-q", *imports, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    board = _testbed("leaderboard", "--results", str(results), "--format", "csv", *imports,
                     cwd=tmp_path)  # fmt: skip
    assert board.returncode == 0, board.stderr[-2000:]
    lines = board.stdout.strip().splitlines()
    header = lines[0].split(",")
    assert "mean_skill" in header and "normalized_skill" in header
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    # higher is better here: mlp ranks first, uniform's skill is 0
    assert [r["label"] for r in rows] == ["mlp", "uniform"]
    assert rows[0]["rank"] == "1" and abs(float(rows[1]["mean_skill"])) < 1e-9
    assert float(rows[0]["mean_skill"]) > 0.1
    made = _testbed("report", "--results", str(results), "--out", str(report), *imports,
                    cwd=tmp_path)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    page = report.read_text()
    assert 'data-table="skill-tau-1"' in page and "Brier skill" in page


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings (nor the package names
    recorded with a result)."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "versions":
            skip |= {id(n) for n in ast.walk(node)}
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]


def test_no_family_is_named_in_the_leaderboard():
    families = set(generative.FAMILIES)
    found = []
    for path in sorted((ROOT / "leaderboard").glob("*.py")):
        for line, text in _string_constants(path):
            words = text.replace("/", " / ").split()
            if (
                text in families
                or any(f"{f}/" in text for f in families)
                or (len(words) == 1 and words[0] in families)
            ):
                found.append(f"{path.name}:{line}: {text!r}")
    assert not found, found
