"""testbed.settings: the TESTBED_* variables read in one place, checked where they are used,
installed for a sweep and handed to its workers explicitly; no other product module reads
the process's environment, and one function writes it."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from testbed import settings
from testbed.errors import InputError
from testbed.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("testbed", "agents", "generative", "leaderboard")


def test_unset_variables_give_the_defaults():
    s = Settings.from_env({})
    assert (s.threads, s.progress, s.memory_gb, s.threefry) == (None, "auto", None, "unrolled")
    assert (s.checkpoints, s.worker, s.tfds_download) == (None, False, False)
    assert s.jax_cache is not None and s.jax_cache.endswith("testbed/jax")


def test_values_are_read_as_the_modules_read_them():
    s = Settings.from_env(
        {
            "TESTBED_THREADS": " 3 ",
            "TESTBED_PROGRESS": " Lines ",
            "TESTBED_MEMORY_GB": "1.5",
            "TESTBED_THREEFRY": "ROLLED",
            "TESTBED_CHECKPOINTS": "/tmp/c",
            "TESTBED_WORKER": "1",
            "TESTBED_TFDS_DOWNLOAD": "yes",
            "XDG_CACHE_HOME": "/c",
            "UNRELATED": "x",
        }
    )
    assert (s.threads, s.progress, s.memory_gb, s.threefry) == (3, "lines", 1.5, "rolled")
    assert (s.checkpoints, s.worker, s.tfds_download) == (Path("/tmp/c"), True, True)
    assert s.jax_cache == "/c/testbed/jax"
    assert s.get("UNRELATED") is None  # only testbed's variables and the cache home's
    assert Settings.from_env({"TESTBED_CHECKPOINTS": " OFF "}).checkpoints is None


@pytest.mark.parametrize(
    "name, value, prop, message",
    [
        ("TESTBED_THREADS", "two", "threads", "TESTBED_THREADS: got 'two'; allowed: an integer"),
        ("TESTBED_PROGRESS", "loud", "progress", "TESTBED_PROGRESS: got 'loud'; allowed: one"),
        ("TESTBED_MEMORY_GB", "inf", "memory_gb", "TESTBED_MEMORY_GB: got 'inf'; allowed: a"),
        ("TESTBED_TFDS_DOWNLOAD", "maybe", "tfds_download", "TESTBED_TFDS_DOWNLOAD: got 'maybe'"),
    ],
)
def test_a_bad_value_fails_where_it_is_used_naming_the_variable(name, value, prop, message):
    s = Settings.from_env({name: value})
    with pytest.raises(InputError, match=message):
        getattr(s, prop)
    others = {"threads", "progress", "memory_gb", "tfds_download", "checkpoints", "worker"}
    for other in others - {prop}:  # the others are read as if it were not there
        getattr(s, other)


def test_a_bad_threefry_choice_is_a_warning_not_an_error():
    s = Settings.from_env({"TESTBED_THREEFRY": "fast"})
    assert s.threefry == "unrolled"
    assert s.threefry_refused.startswith("TESTBED_THREEFRY: got 'fast'")
    assert Settings.from_env({}).threefry_refused is None


def test_the_users_jax_cache_or_off_turns_ours_off():
    assert Settings.from_env({"JAX_COMPILATION_CACHE_DIR": ""}).jax_cache is None
    assert Settings.from_env({"TESTBED_JAX_CACHE": "No"}).jax_cache is None
    assert Settings.from_env({"TESTBED_JAX_CACHE": "/x"}).jax_cache == "/x"


def test_current_follows_the_environment_until_settings_are_installed(monkeypatch):
    monkeypatch.setenv("TESTBED_THREADS", "2")
    assert settings.current().threads == 2
    with settings.using(Settings.from_env({"TESTBED_THREADS": "5"})) as inner:
        assert settings.current() is inner and settings.current().threads == 5
        monkeypatch.setenv("TESTBED_THREADS", "7")  # installed settings hold
        assert settings.current().threads == 5
    assert settings.current().threads == 7


def test_settings_travel_to_a_worker_whole():
    s = Settings.from_env({"TESTBED_PROGRESS": "off", "XDG_CACHE_HOME": "/c"})
    s = s.replace(TESTBED_CHECKPOINTS="/r.db.checkpoints", TESTBED_PROGRESS=None)
    assert pickle.loads(pickle.dumps(s)) == s
    assert s.environ() == {"TESTBED_CHECKPOINTS": "/r.db.checkpoints"}  # ours only
    assert Settings.from_env({**s.environ(), "XDG_CACHE_HOME": "/c"}) == s
    both = {"TESTBED_WORKER": "1", "TESTBED_THREADS": "2"}
    assert Settings.from_env({}).replace(**both) == Settings.from_env(both)  # any order


def test_workers_get_the_drivers_settings_with_their_own(monkeypatch, tmp_path):
    """A local worker's settings are its driver's, with its thread share, progress as
    lines and the sweep's checkpoints (`beside_store`), as its environment says them."""
    from leaderboard.execution.worker import worker_process_env, worker_settings
    from testbed.checkpoints import beside_store

    monkeypatch.delenv("TESTBED_PROGRESS", raising=False)
    monkeypatch.delenv("TESTBED_CHECKPOINTS", raising=False)
    monkeypatch.setenv("TESTBED_MEMORY_GB", "3")
    with beside_store(tmp_path / "r.db", finished=lambda: True) as directory:
        chosen = worker_settings(2)
        env = worker_process_env(2)
    assert (chosen.threads, chosen.progress, chosen.worker) == (2, "lines", True)
    assert chosen.checkpoints == directory and chosen.memory_gb == 3
    assert env["TESTBED_CHECKPOINTS"] == str(directory) and env["OMP_NUM_THREADS"] == "2"


def _environ_uses(path: Path) -> list[tuple[int, str, str]]:
    """(line, what, enclosing function) of each use of the process's environment in `path`:
    `os.environ`, `os.getenv`, `os.putenv`, `os.unsetenv` (or those names imported from os),
    a write said as such."""
    tree = ast.parse(path.read_text())
    functions = {}  # node -> the innermost function it is in
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(func):
                functions[node] = func.name
    names = {"environ", "getenv", "putenv", "unsetenv", "environb", "getenvb"}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            imported = [a.name for a in node.names if a.name in names]
            out += [(node.lineno, f"imports os.{name}", "") for name in imported]
        if not (isinstance(node, ast.Attribute) and node.attr in names):
            continue
        if ast.unparse(node.value) != "os":
            continue
        out.append((node.lineno, _what(tree, node), functions.get(node, "")))
    return sorted(out)


def _what(tree: ast.AST, use: ast.Attribute) -> str:
    """'writes ...' when `use` (os.environ, os.putenv, ...) is written to, else 'reads ...'."""
    if use.attr in ("putenv", "unsetenv"):
        return f"writes os.{use.attr}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            if any(isinstance(t, ast.Subscript) and t.value is use for t in targets):
                return "writes " + ast.unparse(use)
        if isinstance(node, ast.Attribute) and node.value is use:
            if node.attr in ("update", "setdefault", "pop", "popitem", "clear"):
                return f"writes os.{use.attr}.{node.attr}"
    return "reads os." + use.attr


# The one function that writes this process's environment, and the one module that reads it
WRITER = ("testbed/settings.py", "quiet_tensorflow")
READER = "testbed/settings.py"
PRODUCT_WITH_CLI = (*PRODUCT, "experiments")


def test_the_environment_is_read_in_one_module_and_written_in_one_function():
    """testbed.settings alone reads the process's environment (a child's is made there,
    `child_environ`), and writes it in `quiet_tensorflow` alone (TensorFlow reads its log
    level from there at its import); every other module asks `testbed.settings`."""
    found = {}
    for package in PRODUCT_WITH_CLI:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            uses = [
                (line, what)
                for line, what, function in _environ_uses(path)
                if not (name == READER and what.startswith("reads")) and (name, function) != WRITER
            ]
            if uses:
                found[name] = uses
    assert found == {}
    writes = [u for u in _environ_uses(ROOT / READER) if u[1].startswith("writes")]
    assert [function for _, _, function in writes] == [WRITER[1]]


def test_the_environment_check_finds_a_write_and_a_read(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "import os\nos.environ['A'] = '1'\nos.environ.update(B='2')\n"
        "x = os.environ.get('TESTBED_THREADS')\n"
        "def f():\n    os.environ.setdefault('C', '3')\n    return os.getenv('D')\n"
        "from os import environ\n"
    )
    assert _environ_uses(path) == [
        (2, "writes os.environ", ""),
        (3, "writes os.environ.update", ""),
        (4, "reads os.environ", ""),
        (6, "writes os.environ.setdefault", "f"),
        (7, "reads os.getenv", "f"),
        (8, "imports os.environ", ""),
    ]
