"""README.md: short, its first screen the two commands CI runs, and every block runs as written.

The install step and the test command are the ones CI runs (`.ci/run` installs into a
fresh venv and runs the tests), so here they are checked to be exactly those, and the
install is not repeated (see tests/test_docs.py for how blocks run: each one alone, in a
fresh folder, a named sweep cut to its first problem).
"""

from __future__ import annotations

import re

import pytest
from test_docs import README, ROOT, blocks, params, run_block

CI = ROOT / ".ci" / "run"
INSTALL = 'python3 -m venv .venv && .venv/bin/pip install -c constraints.txt -e ".[test]"'
MAX_LINES = 200


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; the docs hold the rest"


def test_first_screen_commands_are_the_ones_ci_runs():
    """README's install is .ci/run's install (minus -q), its test command .ci/run's last
    line: CI proves them on a fresh machine, so the README test need not reinstall."""
    first = blocks(README)[0]
    assert first.lang == "bash" and first.line < 25, "the two commands open the README"
    commands = [c for c in first.code.splitlines() if c.strip() and not c.startswith("#")]
    assert len(commands) == 2
    assert commands[0].startswith(INSTALL + " && ")
    ci = [c.strip() for c in CI.read_text().splitlines()]
    assert '.venv/bin/pip install -q -c constraints.txt -e ".[test]"' in ci
    assert "python3 -m venv .venv" in ci
    assert commands[1] == ci[-1] == ".venv/bin/python -m pytest -n 2 -q"


def test_one_example_per_line_of_work():
    """A runnable Python example for each of the three lines of work."""
    code = [b.code for b in blocks(README) if b.lang == "python"]
    assert len(code) >= 3
    for needle in ("classification", "sbi", "conjugate"):
        assert any(needle in c for c in code), needle


def test_links_point_to_files_that_exist():
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text()):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README.md links to {target}, which is missing"


@pytest.mark.parametrize("block", params([b for b in blocks(README) if b.lang == "python"]))
def test_python_block(block, tmp_path):
    run_block(block, tmp_path)


@pytest.mark.parametrize("block", params([b for b in blocks(README) if b.lang == "bash"]))
def test_shell_block(block, tmp_path):
    out = run_block(block, tmp_path)
    if "testbed report --out report.html" in block.code:  # the main job: sweep, then report
        assert (tmp_path / "testbed-results.db").exists()
        assert (tmp_path / "report.html").stat().st_size > 10_000
        assert "report: " in out
