"""testbed.settings: the TESTBED_* variables read in one place, checked where they are used,
installed for a sweep and handed to its workers explicitly; no product module reads them
itself or writes the process's environment."""

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
    from leaderboard.worker import worker_process_env, worker_settings
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


def _environ_uses(path: Path) -> list[tuple[int, str]]:
    """(line, what) of each `os.environ` write in `path`, and each read of a TESTBED_*
    variable through it."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "os.environ":
                    out.append((node.lineno, "writes " + ast.unparse(t)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = ast.unparse(node.func.value)
            if owner == "os.environ" and node.func.attr in ("update", "setdefault", "pop"):
                out.append((node.lineno, f"writes os.environ.{node.func.attr}"))
            if owner == "os" and node.func.attr in ("putenv", "unsetenv"):
                out.append((node.lineno, f"writes os.{node.func.attr}"))
            text = ast.unparse(node)
            if owner == "os.environ" and "TESTBED_" in text:
                out.append((node.lineno, "reads " + text))
    return out


# The only writes a product module may make: PyTensor reads its BLAS flags from this
# variable when it is imported, and offers no other way to set them before then.
ALLOWED_WRITES = {"agents/ppl/pymc_agent.py": 1}


def test_no_product_module_reads_our_variables_or_writes_the_environment():
    """TESTBED_* is read by testbed.settings alone; a child process gets its environment
    as an argument (leaderboard.processes), never through this process's."""
    found = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            uses = [u for u in _environ_uses(path) if name != "testbed/settings.py"]
            if uses and len(uses) != ALLOWED_WRITES.get(name):
                found[name] = uses
    assert found == {}


def test_the_environment_check_finds_a_write_and_a_read(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "import os\nos.environ['A'] = '1'\nos.environ.update(B='2')\n"
        "x = os.environ.get('TESTBED_THREADS')\n"
    )
    assert [line for line, _ in _environ_uses(path)] == [2, 3, 4]
