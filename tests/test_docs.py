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
- Tiers: the pages' blocks run whole with `-m slow` (CI runs that tier on every landing;
  README.md's run in the default tier, tests/test_readme.py); the default tier checks each
  page's block in well under a second, in this process: its commands parse and name
  registered agents, sweeps and problem families, the files they run compile, its Python
  compiles and every module or attribute of ours it imports exists. The ones of `HEAVY`
  take minutes even when shortened and run with `-m heavy` only.

Both kinds run with OMP_NUM_THREADS=1: the tests run two blocks at once on two cores, and
torch's default threads then wait for each other (the sweep workers set it likewise).
"""

from __future__ import annotations

import ast
import functools
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

# (page, a string of the block): blocks that take many minutes even when shortened, run
# with -m heavy only. Keep this list short.
HEAVY = (("docs/reproductions/sbibm.md", "experiments.reproduce_sbibm"),)


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
        """A page's block runs whole in the slow tier; README.md's in the default one."""
        return self.page != "README.md"


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
    """`slow` for the pages' blocks (not README.md's); `heavy` too for those of HEAVY."""
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
    for page, s in HEAVY:  # a heavy entry that matches no block is stale
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

            agents = set(re.findall(r"^\| ([\w+]+)(?: \(tuned\))? \| (?:1|100) \|", table, re.M))
            assert agents == set(FIGURE_2021), table
        else:
            assert re.search(r"\| ensemble \| 100 \| 1 \| [\d.]+ \|  \| 0\.992 \|", table), table


# ----------------------------------------------------------------------------- the light tier
# What the default tier checks of each page's block (the slow tier runs it whole).

_HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")
_SEPARATORS = {"&&", "||", ";", "|", "&"}
_SKIPPED = {"source", "cd", "export", "echo", "ls", "cat", "sqlite3"}


def commands(code: str) -> list[tuple[list[str], str | None]]:
    """The simple commands of a shell block as (argv, the text a here-document feeds it):
    continuations joined, comments dropped, `&&`, `;` and `|` separating."""
    import shlex

    lines, out = code.replace("\\\n", " ").splitlines(), []
    while lines:
        line = lines.pop(0)
        here = _HEREDOC.search(line)
        body = None
        if here:
            end = lines.index(here.group(1))
            body, lines = "\n".join(lines[:end]) + "\n", lines[end + 1 :]
            line = line[: here.start()]
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        argv: list[str] = []
        for token in [*lexer, ";"]:
            if token in _SEPARATORS:
                if argv:
                    out.append((argv, body))
                argv = []
            else:
                argv.append(token)
    return out


class _Parsed(Exception):
    """Raised by argparse's parse_args in `parsed_args`: the command stops once parsed."""

    def __init__(self, args):
        self.args_ = args


def parsed_args(main, argv: list[str], monkeypatch):
    """The namespace `main` (a command's entry point) parses from `argv`, running nothing
    after (None for --help); argparse's own error (status 2) fails the test with its
    message."""
    import argparse
    import contextlib
    import io

    original = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        raise _Parsed(original(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_and_stop)
    monkeypatch.setattr(sys, "argv", ["prog", *argv])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            main(argv) if main.__code__.co_argcount else main()
    except _Parsed as done:
        return done.args_
    except SystemExit as e:
        if e.code == 0:  # --help: answered
            return None
        pytest.fail(f"{argv}: exit {e.code}: {err.getvalue()[-1000:]}")
    finally:
        monkeypatch.undo()
    pytest.fail(f"{argv}: the command ran without parsing arguments")


@functools.cache
def _index() -> dict:
    """The registries' index as `testbed` answers from it (built once per test process)."""
    from experiments import catalog
    from experiments.console import list_rows

    return catalog.build(list_rows)


def check_testbed_names(args) -> None:
    """`testbed run`/`sweep` without --import: its agents, sweep and problem families are
    registered (the library's own lookups give the error), --set/--option as the index
    judges them (experiments.catalog, what `testbed` answers before loading the stack)."""
    import agents
    import generative
    from experiments import catalog
    from experiments.cli import MAX_JOBS
    from experiments.comma_lists import split_items

    if args.command not in ("run", "sweep") or args.imports:
        return
    for name in split_items(args.agent, "--agent") if args.command == "sweep" else [args.agent]:
        agents.load(name)
    ids = generative.sweep_ids(args.sweep) if getattr(args, "sweep", None) else []
    swept = args.command == "sweep"
    given = split_items(args.problem, "--problem") if swept and args.problem else []
    for problem in ids or (given if swept else [args.problem]):
        generative.registry.split_id(problem)
        if "file:" not in problem:  # a file the block writes first
            generative.problem_settings(problem)
    index = _index()
    try:
        if args.command == "run":
            catalog.check_run(index, args)
        else:
            catalog.check_sweep(index, args, MAX_JOBS)
    except catalog.Answer as e:
        pytest.fail(f"testbed {args.command}: {e}")


def check_command(argv: list[str], body: str | None, monkeypatch) -> str:
    """One command of a page's block, checked without running it; what it was."""
    import importlib

    name = Path(argv[0]).name
    if name in _SKIPPED or name in ("python3", "pip") or argv[:1] == ["python3"]:
        return "skipped"
    if name == "testbed":
        from experiments.cli import main

        args = parsed_args(main, argv[1:], monkeypatch)
        if args is None:
            return "testbed --help"
        for module in getattr(args, "imports", None) or []:
            if module.endswith(".py"):
                compile((ROOT / module).read_text(), module, "exec")
            else:
                importlib.import_module(module)
        check_testbed_names(args)
        return f"testbed {args.command}"
    assert name == "python", f"{argv}: a command the light tier does not know"
    if argv[1:3] == ["-m", "pytest"]:
        return "skipped"
    if argv[1] == "-m":
        module = importlib.import_module(argv[2])
        parsed_args(module.main, argv[3:], monkeypatch)
        return argv[2]
    if argv[1] == "-c":
        compile(argv[2], "<-c>", "exec")
        return "python -c"
    if argv[1] == "-":
        compile(body or "", "<stdin>", "exec")
        return "python -"
    compile((ROOT / argv[1]).read_text(), argv[1], "exec")
    return argv[1]


def test_commands_split_as_the_shell_splits_them():
    code = (
        "python - <<'EOF'\nimport x\nEOF\ntestbed sweep --agent a \\\n  --sweep s && "
        "testbed leaderboard  # ranked\n.venv/bin/testbed report --out 'a b.html'\n"
    )
    assert commands(code) == [
        (["python", "-"], "import x\n"),
        (["testbed", "sweep", "--agent", "a", "--sweep", "s"], None),
        (["testbed", "leaderboard"], None),
        ([".venv/bin/testbed", "report", "--out", "a b.html"], None),
    ]


def test_the_light_tier_refuses_a_typo(monkeypatch):
    """What the default tier checks can fail: an unknown option, agent or sweep."""
    from testbed.errors import InputError

    for argv, error, says in (
        (["testbed", "sweep", "--agnet", "mlp", "--sweep", "coin"], pytest.fail.Exception,
         "did you mean '--agent'?"),
        (["testbed", "sweep", "--agent", "mlpp", "--sweep", "coin"], InputError, "'mlpp'"),
        (["testbed", "sweep", "--agent", "mlp", "--sweep", "coins"], InputError, "'coins'"),
        (["testbed", "run", "--agent", "mlp", "--problem", "coin/0", "--set", "widht=3"],
         pytest.fail.Exception, "unknown setting 'widht'"),
        (["python", "-m", "experiments.reproduce_wyb", "--reprot"], pytest.fail.Exception,
         "--reprot"),
        (["python", "-c", "print(("], SyntaxError, "never closed"),
    ):  # fmt: skip
        with pytest.raises(error, match=re.escape(says)):
            check_command(argv, None, monkeypatch)
    assert check_command(["testbed", "sweep", "--agent", "mlp", "--sweep", "coin"], None,
                         monkeypatch) == "testbed sweep"  # fmt: skip
    code = ("import numpy\nfrom leaderboard.execution.sweeping import run, nothing_here\n"
            "import agents.nope\n")  # fmt: skip
    imported = _ours_imported(code)
    assert imported == ["leaderboard.execution.sweeping.run",
                        "leaderboard.execution.sweeping.nothing_here", "agents.nope"]  # fmt: skip
    assert [n for n in imported if not _resolves(n)] == imported[1:]


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in all_blocks("bash", False)])
def test_shell_block_parses(block, monkeypatch):
    """Each command of a page's shell block parses as its program parses it, names what is
    registered, and each file it runs compiles (the slow tier runs the block whole)."""
    checked = [check_command(argv, body, monkeypatch) for argv, body in commands(block.code)]
    assert checked, f"{block.id}: no command found"


def _ours_imported(code: str) -> list[str]:
    """Dotted names of ours a Python block imports (`from a.b import c` gives `a.b.c`)."""
    out = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
    return [n for n in out if n.split(".")[0] in OUR_PACKAGES]


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in all_blocks("python", False)])
def test_python_block_compiles_and_imports_what_exists(block):
    """A page's Python block compiles and every module or name of ours it imports exists
    (the slow tier runs it whole)."""
    compile(block.code, block.id, "exec")
    missing = [n for n in _ours_imported(block.code) if not _resolves(n)]
    assert missing == [], f"{block.id} imports what does not exist: {missing}"


@pytest.mark.slow  # the site's strict build: CI builds it before the tests too
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
OUR_PACKAGES = ("leaderboard", "testbed", "agents", "generative", "experiments")
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
    """A dotted name of ours in backticks (`leaderboard.execution.sweeping.plan`) in README.md
    or the docs imports as written: `leaderboard.sweep.plan`, which the call shadowed, did not."""
    named = {
        (m.group(1), path.relative_to(ROOT).as_posix())
        for path in [README, *sorted(DOCS.rglob("*.md"))]
        for m in re.finditer(OURS, path.read_text())
    }
    assert len(named) > 40  # the pattern still finds the docs' names
    assert [
        (n, where) for n, where in sorted(named) if n not in NOT_MODULES and not _resolves(n)
    ] == []
