"""Every code block of README.md runs as written.

Shell blocks run one after another in a fresh folder (named sweeps cut to their first two
problems by TESTBED_SWEEP_LIMIT, so the suite stays short); Python blocks run in order as
one script in a fresh process. The install step and the test command are the ones CI runs
(`.ci/run` installs into a fresh venv and runs the tests), so here they are checked to be
exactly those, and the install is not repeated: `.venv` in the folder points at this
interpreter's environment. Blocks that take long (`SLOW_BLOCKS`) run with `-m slow`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
RUN = ("python", "bash")  # block languages that run; ```, ```text and ```toml are shown only
SLOW_BLOCKS = ("experiments.reproduce_sbibm",)  # hours as written; minutes when limited
INSTALL = 'python3 -m venv .venv && .venv/bin/pip install -c constraints.txt -e ".[test]"'


def blocks() -> list[tuple[str, str, int]]:
    """(language, code, line) of every fenced block of the README."""
    out, lang, code, start = [], None, [], 0
    for n, line in enumerate(README.read_text().splitlines(), 1):
        if line.startswith("```") and lang is None:
            lang, code, start = line[3:].strip(), [], n
        elif line.startswith("```"):
            out.append((lang, "\n".join(code) + "\n", start))
            lang = None
        elif lang is not None:
            code.append(line)
    assert lang is None, f"README.md: the block at line {start} is not closed"
    return out


def _slow(code: str) -> bool:
    return any(s in code for s in SLOW_BLOCKS)


def test_every_block_is_runnable_or_plain_text():
    shown = {"", "text", "toml"}
    langs = {lang for lang, _, _ in blocks()}
    assert langs <= {*RUN, *shown}, f"README.md: blocks in {langs - {*RUN, *shown}}"
    assert {"python", "bash"} <= langs
    for lang, code, line in blocks():
        if lang == "toml":  # e.g. a pyproject.toml snippet: it must parse
            assert tomllib.loads(code), f"README.md: the toml block at line {line}"


def test_first_screen_commands_are_the_ones_ci_runs():
    """README's install is .ci/run's install (minus -q), its test command .ci/run's last
    line: CI proves them on a fresh machine, so the README test need not reinstall."""
    lang, code, line = blocks()[0]
    assert lang == "bash" and line < 25, "the two commands open the README"
    commands = [c for c in code.splitlines() if c.strip() and not c.startswith("#")]
    assert len(commands) == 2
    assert commands[0].startswith(INSTALL + " && ")
    ci = [c.strip() for c in CI.read_text().splitlines()]
    assert '.venv/bin/pip install -q -c constraints.txt -e ".[test]"' in ci
    assert "python3 -m venv .venv" in ci
    assert commands[1] == ci[-1] == ".venv/bin/python -m pytest -n 2 -q"


def _folder(tmp_path: Path) -> dict[str, str]:
    """A fresh folder (with the repo's examples/) whose `.venv` runs this environment, and
    the environment for it:
    `python3 -m venv .venv` and `.venv/bin/pip install ...` of the first command are done
    already (see the module docstring), named sweeps take their first two problems."""
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    real = Path(sys.executable).parent
    for name in ("python", "testbed"):
        (bin_ / name).write_text(f'#!/bin/sh\nexec "{real / name}" "$@"\n')
    (bin_ / "pip").write_text(  # the install of the first command: checked, not repeated
        '#!/bin/sh\n[ "$*" = "install -c constraints.txt -e .[test]" ] || '
        '{ echo "unexpected pip $*" >&2; exit 3; }\n'
    )
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "python3").write_text(  # `python3 -m venv .venv`: the venv is there already
        '#!/bin/sh\n[ "$*" = "-m venv .venv" ] && exit 0\n'
        f'exec "{Path(sys.executable).resolve()}" "$@"\n'
    )
    for f in (*bin_.iterdir(), shims / "python3"):
        f.chmod(0o755)
    (tmp_path / "constraints.txt").write_text((ROOT / "constraints.txt").read_text())
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # commands name examples/*.py
    env = {**os.environ, "TESTBED_SWEEP_LIMIT": "2", "PATH": f"{shims}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    return env


def _run_shell(code: str, cwd: Path, env: dict[str, str], line: int) -> str:
    if "-m pytest" in code:  # the test command itself (checked above, run by CI)
        code = "\n".join(c for c in code.splitlines() if "-m pytest" not in c)
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", code],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, f"README.md block at line {line} failed:\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_shell_blocks_run_as_written(tmp_path):
    env = _folder(tmp_path)
    ran = 0
    for lang, code, line in blocks():
        if lang != "bash" or _slow(code):
            continue
        out = _run_shell(code, tmp_path, env, line)
        ran += 1
        if "testbed report --out report.html" in code:
            assert (tmp_path / "report.html").stat().st_size > 10_000
            assert "report: " in out
    assert ran >= 4
    assert (tmp_path / "testbed-results.db").exists()


def test_python_blocks_run_as_written(tmp_path):
    """All Python blocks in order, one process (later blocks use earlier names), in a
    folder where the first command has run (a results file exists: one quick job)."""
    env = _folder(tmp_path)
    _run_shell(
        ".venv/bin/testbed sweep --agent uniform --problem coin/4 --executor inline --quiet",
        tmp_path, env, 0,
    )  # fmt: skip
    code = [c for lang, c, _ in blocks() if lang == "python" and not _slow(c)]
    script = tmp_path / "readme_blocks.py"
    script.write_text("\n".join(code))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_slow_blocks_run_as_written(tmp_path):
    """The hours-long reproduction, on the first problem of its grid (TESTBED_SWEEP_LIMIT=1):
    every agent named runs on sbi/two_moons/1000/1, then the table and figure."""
    env = {**_folder(tmp_path), "TESTBED_SWEEP_LIMIT": "1"}
    slow = [(c, n) for lang, c, n in blocks() if lang == "bash" and _slow(c)]
    assert slow
    for code, line in slow:
        _run_shell(code, tmp_path, env, line)
    table = (tmp_path / "sbibm-reproduction" / "table.md").read_text()
    agents = re.findall(r"\| two_moons \| 1,000 \| (\w+) \|", table)
    assert sorted(agents) == sorted(shlex.split(slow[0][0])[-1].split(",")), table
