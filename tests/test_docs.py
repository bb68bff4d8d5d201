"""Every fenced code block of README.md and docs/**/*.md runs as written, and the site builds.

- `python` blocks: each one alone, in a fresh process and a fresh folder: a block is
  runnable on its own (its imports in it), never relying on another block.
- `bash` blocks: each one alone (`bash -e -o pipefail`), in a fresh folder holding the
  repository's `examples/` and a `.venv` that runs this environment: `.venv/bin/testbed`,
  `.venv/bin/python` and, as after `source .venv/bin/activate`, `testbed` and `python` on
  the PATH. The install commands (`python3 -m venv .venv`, `.venv/bin/pip install -c
  constraints.txt -e ".[extras]"`) are checked, not repeated; the test command
  (`-m pytest`) is CI's, not run here.
- Long work is shortened by the test, not by the product: `testbed sweep ... --sweep NAME`
  runs the sweep's first problem (`--problem ID`), and
  `experiments.reproduce_sbibm` its first task, budget and observation.
- `text`, `toml` and unlabelled blocks are shown only; a `toml` block must parse.
- Blocks that stay long after shortening are listed in `SLOW` and run with `-m slow`.

Both kinds run with OMP_NUM_THREADS=1: the tests run two blocks at once on two cores, and
torch's default threads then wait for each other (the sweep workers set it likewise).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
RUN = ("python", "bash", "sql")  # sql: run on a store a sweep wrote
SHOWN = ("", "text", "toml")
SWEEP_PROBLEMS = 1  # a shortened sweep runs this many of its first problems
TIMEOUT = 1200  # seconds a block may take

# (page, a string of the block): blocks that take minutes even when shortened, run with
# -m slow only. Keep this list short.
SLOW = (
    ("docs/reproductions/sbibm.md", "experiments.reproduce_sbibm"),
    ("docs/how-to/sweeps.md", "--executor ray"),
    ("docs/reproductions/neural_testbed.md", "experiments.reproduce_neural_testbed"),
)
HEAVY = (("docs/reproductions/sbibm.md", "experiments.reproduce_sbibm"),)  # minutes


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    lang: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def slow(self) -> bool:
        return any(self.page == page and s in self.code for page, s in SLOW)


def pages() -> list[Path]:
    """README.md and every page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page (fences start a line: none is indented)."""
    page = str(path.relative_to(ROOT))
    out, lang, code, start = [], None, [], 0
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```") and lang is None:
            lang, code, start = line[3:].strip(), [], n
        elif line.startswith("```"):
            out.append(Block(page, start, lang, "\n".join(code) + "\n"))
            lang = None
        elif lang is not None:
            code.append(line)
        else:
            assert not re.match(r"\s+```", line), f"{page}:{n}: an indented fence is not run"
    assert lang is None, f"{page}: the block at line {start} is not closed"
    return out


def all_blocks(lang: str | None = None, readme: bool = True) -> list[Block]:
    """The blocks of README.md (unless `readme` is False) and of the site's pages."""
    found = [b for p in pages() if readme or p != README for b in blocks(p)]
    return [b for b in found if lang is None or b.lang == lang]


def params(found: list[Block]) -> list:
    return [pytest.param(b, id=b.id, marks=marks(b)) for b in found]


def marks(block: Block) -> list:
    """`slow` for the blocks of SLOW; `heavy` too for those of HEAVY."""
    heavy = any(block.page == page and s in block.code for page, s in HEAVY)
    return [pytest.mark.slow, *([pytest.mark.heavy] if heavy else [])] if block.slow else []


# ----------------------------------------------------------------------------- shortening


def sweep_problems(name: str) -> str:
    import generative

    return ",".join(generative.sweep_ids(name)[:SWEEP_PROBLEMS])


# `testbed sweep` up to the end of its command (`;`, `&&`, `|` or a line end that is not
# continued), and its `--sweep NAME` in it
_SWEEP_COMMAND = re.compile(r"testbed sweep(?:[^;&|\n\\]|\\\n|\\.)*")
_SWEEP_OPTION = re.compile(r"--sweep[ =](\S+)")


def shortened(code: str) -> str:
    """The block as the test runs it: named sweeps cut to their first problems, the SBI
    benchmark's reproduction to its first task, budget and observation."""

    def cut_sweep(m: re.Match) -> str:
        return _SWEEP_OPTION.sub(lambda o: f"--problem {sweep_problems(o.group(1))}", m.group(0))

    code = _SWEEP_COMMAND.sub(cut_sweep, code)
    neural_testbed = "experiments.reproduce_neural_testbed" in code
    if neural_testbed and "--problems" not in code and "--report" not in code:  # it runs
        code = code.replace(  # two agents on the first problem of each tau
            "experiments.reproduce_neural_testbed",
            "experiments.reproduce_neural_testbed --agents mlp,ensemble "
            "--problems classification_2d_2021/0,classification_2d_2021/1",
        )
    if "experiments.reproduce_sbibm" in code:
        code = re.sub(r"(--(?:tasks|budgets)[ =])([^,\s]+)\S*", r"\1\2", code)
        if "--observations" not in code:
            code = code.replace(
                "experiments.reproduce_sbibm", "experiments.reproduce_sbibm --observations 1"
            )
    return code


def test_shortening_keeps_the_command_and_cuts_the_sweep():
    first = sweep_problems("classification_2d_test")
    code = (
        ".venv/bin/testbed sweep --agent a,b --sweep classification_2d_test"
        " && testbed report --sweep x\n"
    )
    assert shortened(code) == (
        f".venv/bin/testbed sweep --agent a,b --problem {first} && testbed report --sweep x\n"
    )
    assert len(first.split(",")) == SWEEP_PROBLEMS
    code = "testbed sweep --agent a \\\n    --sweep=coin --results r.db\n"
    assert (
        shortened(code)
        == f"testbed sweep --agent a \\\n    --problem {sweep_problems('coin')} --results r.db\n"
    )
    code = "python -m experiments.reproduce_sbibm --tasks a,b --budgets 1000,10000 --agents x,y\n"
    assert shortened(code) == (
        "python -m experiments.reproduce_sbibm --observations 1 --tasks a --budgets 1000 "
        "--agents x,y\n"
    )


# ----------------------------------------------------------------------------- the folder


def folder(tmp_path: Path) -> dict[str, str]:
    """A fresh folder (with the repository's examples/ and constraints.txt) whose `.venv`
    runs this environment, and the environment a block runs in (`.venv/bin` on the PATH)."""
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    real = Path(sys.executable).parent
    for name in ("python", "testbed", "mkdocs"):
        (bin_ / name).write_text(f'#!/bin/sh\nexec "{real / name}" "$@"\n')
    extras = "|".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                      ["optional-dependencies"])  # fmt: skip
    (bin_ / "pip").write_text(  # the install of the pages: checked, not repeated
        "#!/bin/sh\n"
        f'echo "$*" | grep -Eqx '
        f'"install -c constraints.txt -e \\.(\\[({extras})(,({extras}))*\\])?" '
        '|| { echo "unexpected pip $*" >&2; exit 3; }\n'
    )
    (bin_ / "activate").write_text(f'export PATH="{bin_}:$PATH"\n')
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
    env = {**os.environ, "PATH": f"{bin_}:{shims}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    return env


def run_block(block: Block, tmp_path: Path) -> str:
    """Runs the block in a fresh folder; returns its stdout (fails with its stderr)."""
    env = folder(tmp_path)
    if block.lang == "python":
        script = tmp_path / "block.py"
        script.write_text(block.code)
        command = [sys.executable, str(script)]
    else:
        code = "\n".join(c for c in block.code.splitlines() if "-m pytest" not in c)
        command = ["bash", "-e", "-o", "pipefail", "-c", shortened(code)]
    proc = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0, (
        f"{block.id} ({block.lang}) failed with status {proc.returncode}:\n"
        f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    return proc.stdout


# ----------------------------------------------------------------------------- the tests


def test_every_block_runs_or_is_shown():
    found = all_blocks()
    langs = {b.lang for b in found}
    assert langs <= {*RUN, *SHOWN}, f"blocks in {langs - {*RUN, *SHOWN}}: not run, not shown"
    for b in found:
        if b.lang == "toml":  # e.g. a pyproject.toml snippet: it must parse
            assert tomllib.loads(b.code), b.id
    for page, s in SLOW:  # a slow entry that matches no block is stale
        assert any(b.page == page and s in b.code for b in found), (page, s)


def test_pages_name_no_issue():
    for path in [*pages(), ROOT / "CHANGELOG.md"]:
        text = path.read_text()
        for pattern in (r"\bissues? #?\d+", r"(?<![\w/])#\d+\b"):
            found = re.search(pattern, text, re.IGNORECASE)
            assert not found, f"{path.relative_to(ROOT)}: {found.group(0)!r}"


def test_every_page_is_in_the_nav():
    yaml = pytest.importorskip("yaml")
    nav = yaml.safe_load(MKDOCS.read_text())["nav"]

    def files(item) -> list[str]:
        if isinstance(item, str):
            return [item]
        if isinstance(item, list):
            return [f for i in item for f in files(i)]
        return [f for v in item.values() for f in files(v)]

    listed = set(files(nav))
    # docs/notebooks links to ../notebooks, which rglob does not enter
    pages = [*DOCS.rglob("*.md"), *(DOCS / "notebooks").glob("*.ipynb")]
    on_disk = {str(p.relative_to(DOCS)) for p in pages}
    assert on_disk == listed, (on_disk - listed, listed - on_disk)


# README.md's blocks run in tests/test_readme.py (with its own checks of the first screen)


@pytest.mark.parametrize("block", params(all_blocks("python", readme=False)))
def test_python_block(block, tmp_path):
    run_block(block, tmp_path)


@pytest.mark.parametrize("block", params(all_blocks("bash", readme=False)))
def test_shell_block(block, tmp_path):
    run_block(block, tmp_path)
    if "experiments.reproduce_sbibm" in block.code:  # its table names every agent it ran
        table = (tmp_path / "sbibm-reproduction" / "table.md").read_text()
        ran = re.findall(r"\| two_moons \| 1,000 \| (\w+) \|", table)
        named = re.search(r"--agents[ =](\S+)", block.code).group(1).split(",")
        assert sorted(ran) == sorted(named), table
    if "experiments.reproduce_neural_testbed" in block.code:  # ours beside the published
        table = (tmp_path / "neural-testbed-reproduction" / "table.md").read_text()
        if "--report" in block.code:  # the package's shipped runs: every agent of the figure
            from experiments.reproduce_neural_testbed import FIGURE_2021

            agents = set(re.findall(r"^\| ([\w+]+) \| (?:1|100) \|", table, re.M))
            assert agents == set(FIGURE_2021), table
        else:
            assert re.search(r"\| ensemble \| 100 \| 1 \| [\d.]+ \|  \| 0\.992 \|", table), table


def test_site_builds_strict(tmp_path):
    """`mkdocs build --strict`, as CI runs it: a broken link, a missing page or an API
    object mkdocstrings cannot find fails the build; the notebooks are pages of it."""
    modules = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
    for module in (*modules, "mkdocs_jupyter"):
        try:
            __import__(module)
        except ImportError:
            pytest.skip(f"{module} is not installed (pip install -e '.[docs]')")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()
    page = tmp_path / "site" / "notebooks" / "your_agent_on_the_testbed" / "index.html"
    assert "jittered_centroids" in page.read_text()  # the notebook, rendered


@pytest.mark.parametrize("block", params(all_blocks("sql")))
def test_sql_block(block, tmp_path, capsys):
    """A query the pages give runs, as written, on a store a sweep wrote, and returns rows."""
    import sqlite3

    from experiments.cli import main

    db = tmp_path / "results.db"
    argv = ["sweep", "--agent", "uniform", "--problem", "coin/0,coin/1", "--executor", "inline",
            "--results", str(db), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(block.code).fetchall()
    finally:
        conn.close()
    assert len(rows) == 2 and all(None not in r for r in rows), rows


# names in the docs that look like our modules but are not: entry-point groups
NOT_MODULES = {"testbed.agents"}
OURS = r"`((?:leaderboard|testbed|agents|generative|experiments)(?:\.[A-Za-z_]\w*)+)`"


def _resolves(name: str) -> bool:
    """`name` is a module or an attribute path under one (the longest importable prefix)."""
    import importlib

    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for part in parts[i:]:
                obj = getattr(obj, part)
        except AttributeError:
            return False
        return True
    return False


def test_every_name_of_ours_the_docs_give_exists():
    """A dotted name of ours in backticks (`leaderboard.sweeping.plan`) in README.md or the
    docs imports as written: `leaderboard.sweep.plan`, which the call shadowed, did not."""
    named = {
        (m.group(1), path.relative_to(ROOT).as_posix())
        for path in [README, *sorted(DOCS.rglob("*.md"))]
        for m in re.finditer(OURS, path.read_text())
    }
    assert len(named) > 40  # the pattern still finds the docs' names
    assert [
        (n, where) for n, where in sorted(named) if n not in NOT_MODULES and not _resolves(n)
    ] == []
