"""Fast answers: a mistyped name, `testbed list` and `--help` without JAX, torch
or sbi; did-you-mean for settings; a hint to `--import` the file that registers a name;
`--seeds` on an agent that takes no seed."""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from experiments import catalog
from experiments.cli import MAX_JOBS, build_parser, main
from experiments.console import list_rows, show_list

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("jax", "torch", "sbi", "jaxlib", "haiku", "optax", "sklearn", "pandas")
# the answer in a fresh process, and the modules it imported (of HEAVY)
DRIVER = textwrap.dedent(
    """
    import sys
    from experiments.cli import main
    try:
        status = main(sys.argv[1:])
    except SystemExit as e:  # --help
        status = e.code
    heavy = {heavy!r}
    print("HEAVY", sorted(m for m in heavy if m in sys.modules), file=sys.stderr)
    sys.exit(status)
    """
).format(heavy=HEAVY)


def _fresh(argv, env, cwd):
    """`testbed ARGV` in a new process: (status, stderr, CPU seconds, heavy modules)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, *argv], env=env, cwd=cwd, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stderr.splitlines()
    heavy = json.loads(lines[-1].removeprefix("HEAVY ").replace("'", '"'))
    return done.returncode, "\n".join(lines[:-1]), cpu, heavy


@pytest.fixture
def env(tmp_path):
    env = {**os.environ, catalog.CATALOG_ENV: str(tmp_path / "index")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_a_mistyped_agent_answers_in_a_fraction_of_a_second_without_jax(env, tmp_path):
    argv = ["run", "--agent", "nosuch", "--problem", "classification_2d/0"]
    # the first command of this state of the source imports everything and writes the index
    status, first, _, heavy = _fresh(argv, env, tmp_path)
    assert status == 2 and "jax" in heavy
    assert list((tmp_path / "index").glob("*.json"))
    for _ in range(3):  # a source file edited meanwhile (a shared checkout) is a new state
        status, err, cpu, heavy = _fresh(argv, env, tmp_path)
        if not heavy:
            break
    assert status == 2 and err == first  # the same one line, at once
    assert err.startswith("testbed: error: agent: got 'nosuch'; allowed: one of: ")
    assert heavy == []
    assert cpu < 1.5, f"{cpu:.2f} s of CPU"  # 0.05-0.1 s measured; the whole way: 2-4 s
    # list and a misspelt setting too
    status, err, cpu, heavy = _fresh(["list", "agents", "--json"], env, tmp_path)
    assert status == 0 and heavy == [] and cpu < 1.5
    argv = ["sweep", "--agent", "mlp", "--sweep", "coin", "--set", "learning_rat=1"]
    status, err, cpu, heavy = _fresh(argv, env, tmp_path)
    assert status == 2 and heavy == [] and "did you mean 'learning_rate'?" in err


def test_help_imports_nothing_heavy(env, tmp_path):
    status, _, cpu, heavy = _fresh(["sweep", "--help"], env, tmp_path)
    assert status == 0 and heavy == [] and cpu < 1.5


def _args(argv):
    return build_parser().parse_args(argv)


@pytest.fixture
def index(tmp_path, monkeypatch):
    """The index of this process's registries, written where catalog.load finds it."""
    monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "index"))
    monkeypatch.chdir(tmp_path)  # no examples/ here: no --import hint
    assert catalog.write(catalog.build(list_rows)) is not None
    assert catalog.load() is not None
    return tmp_path


ANSWERED = [
    ["run", "--agent", "nosuch", "--problem", "coin/0"],
    ["run", "--agent", "MLP", "--problem", "coin/0"],
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "learning_rat=0.1"],
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "learning_rate=abc"],
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "learning_rate=nan"],
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "l2_weight_decay=-inf"],
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "num_batches=1.5"],
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "batch_strategy=maybe"],
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "num_batches=9", "--set", "lr=1"],
    ["run", "--agent", "mlp", "--problem", "coin0"],
    ["run", "--agent", "mlp", "--problem", "clasification_2d/0"],
    ["sweep", "--agent", "mlp", "--sweep", "nosuch"],
    ["sweep", "--agent", "mlp,nosuch", "--sweep", "coin", "--seeds", "0-2"],
    ["sweep", "--agent", "nosuch", "--sweep", "coin", "--configs", "sweep"],
    ["sweep", "--agent", "mlp,uniform", "--sweep", "coin", "--set", "lr=3"],
    ["sweep", "--agent", "mlp", "--agent", "uniform", "--sweep", "coin", "--set", "Seeed=3"],
    ["sweep", "--agent", "mlp,,uniform", "--sweep", "coin"],  # an empty item: refused
    ["sweep", "--agent", "mlp", "--agent", "mlp", "--sweep", "nosuch"],  # twice, then the sweep
    ["run", "--agent", "nosuch", "--problem", "coin/0", "--metrics", "joint_kl,"],
    ["list", "agents"],
    ["list", "agents", "--json"],
    ["list", "problems"],
    ["list", "problems", "--json"],
    ["list", "sweeps", "--json"],
    ["list", "metrics"],
]


@pytest.mark.parametrize("argv", ANSWERED, ids=" ".join)
def test_the_index_answers_as_the_whole_way(argv, index, capsys, monkeypatch):
    status = catalog.fast_answer(_args(argv), max_jobs=MAX_JOBS, show=show_list)
    assert status is not None, "the index did not answer"
    fast = capsys.readouterr()
    monkeypatch.setenv(catalog.CATALOG_ENV, "off")
    assert main(argv) == status
    whole = capsys.readouterr()
    assert (fast.out, fast.err) == (whole.out, whole.err)
    assert fast.err.startswith("testbed: error: ") if status else fast.out


LEFT_TO_THE_WHOLE_WAY = [
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "learning_rate=-1"],  # a range
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "hidden_sizes=a,b"],  # a tuple
    ["run", "--agent", "mlp", "--problem", "coin/0", "--set", "num_batches=1e3"],  # fine
    ["run", "--agent", "uniform", "--problem", "coin/99"],  # an id of a known family
    ["run", "--agent", "uniform", "--problem", "coin/0", "--seed", "3"],
    ["run", "--agent", "uniform", "--problem", "nosuch/0", "--option", "a=1"],
    ["sweep", "--agent", "nosuch", "--problem", "coin/0"],  # ids are the families' to judge
    ["sweep", "--agent", "nosuch", "--sweep", "coin", "--seeds", "3-1"],
    ["sweep", "--agent", "nosuch", "--sweep", "coin", "--seeds", "0-999999"],
    ["sweep", "--agent", "nosuch", "--sweep", "coin", "--seeds", "0,,1"],  # the seeds' error
    ["sweep", "--agent", "mlp,", "--sweep", "coin", "--set", "a"],  # --set's error comes first
    ["run", "--agent", "nosuch", "--problem", "coin/0", "--option", "a"],  # --option's error
    ["list", "agents", "--import", "examples/my_agent.py"],
]


@pytest.mark.parametrize("argv", LEFT_TO_THE_WHOLE_WAY, ids=" ".join)
def test_what_the_index_cannot_judge_takes_the_whole_way(argv, index, capsys):
    assert catalog.fast_answer(_args(argv), max_jobs=MAX_JOBS, show=show_list) is None
    assert capsys.readouterr() == ("", "")


def test_inf_where_a_setting_says_what_it_means(tmp_path, monkeypatch, capsys, scoped_registries):
    import dataclasses

    import agents
    from testbed.config import INF

    @dataclasses.dataclass(frozen=True)
    class Patience:
        patience: float = dataclasses.field(default=10.0, metadata={INF: "never stop"})

    agents.register("patient", Patience)(lambda config: None)
    monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "index"))
    monkeypatch.chdir(tmp_path)
    catalog.write(catalog.build(list_rows))
    argv = ["run", "--agent", "patient", "--problem", "nosuch/0", "--set"]
    said = {}
    for value in ("inf", "nan", "x"):
        args = _args([*argv, f"patience={value}"])
        status = catalog.fast_answer(args, max_jobs=MAX_JOBS, show=show_list)
        said[value] = capsys.readouterr().err
        if value == "inf":  # allowed: the whole way's to go on with
            assert status is None and said[value] == ""
            continue
        monkeypatch.setenv(catalog.CATALOG_ENV, "off")
        assert main([*argv, f"patience={value}"]) == status == 2
        assert capsys.readouterr().err == said[value]
        monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "index"))
    assert said["nan"].endswith("got 'nan'; allowed: a finite number, or inf: never stop\n")
    assert said["x"].endswith("got 'x'; allowed: a number\n")


def test_no_index_for_another_state_of_the_source(tmp_path, monkeypatch):
    monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "index"))
    package = tmp_path / "pkg"
    package.mkdir()
    monkeypatch.setattr(catalog, "_package_dirs", lambda: [package])
    catalog.write({"format": catalog.FORMAT})
    assert catalog.load() == {"format": catalog.FORMAT}
    # an index without what a command needs (another layout) answers nothing
    argv = ["run", "--agent", "nosuch", "--problem", "coin/0"]
    assert catalog.fast_answer(_args(argv), max_jobs=MAX_JOBS, show=show_list) is None
    (package / "new_agent.py").write_text("x = 1\n")  # an edit: another key, no index
    assert catalog.load() is None
    catalog.write({"format": catalog.FORMAT})
    monkeypatch.setattr(catalog, "_plugins_installed", lambda: True)
    assert catalog.load() is None  # plugins may register anything: the whole way
    monkeypatch.setenv(catalog.CATALOG_ENV, "off")
    assert catalog.cache_dir() is None and catalog.write({}) is None


def test_a_process_that_holds_the_registries_asks_them(monkeypatch, capsys, tmp_path):
    """A test or notebook may register agents: main() does not answer from an index."""
    import agents

    monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path))
    monkeypatch.setattr(catalog, "load", lambda: pytest.fail("the index was read"))
    with agents.AGENTS.scope():

        @agents.register("fast_answers_probe")
        def probe(train_data, prior_knowledge, *, scale: float = 1.0):
            raise AssertionError

        argv = ["run", "--agent", "fast_answers_probe", "--problem", "coin/0", "--set", "x=1"]
        assert main(argv) == 2
    assert "agent fast_answers_probe: unknown setting 'x'" in capsys.readouterr().err


# ----- did you mean, for the settings of an agent of one's own


MY_AGENT = """
import agents

@agents.register("jittered_mean", predicts="labels")
def jittered_mean(train_data, prior_knowledge, *, jitter: float = 0.1, seed: int = 0):
    raise NotImplementedError
"""


def test_did_you_mean_for_a_setting_of_an_imported_agent(tmp_path, capsys, scoped_registries):
    path = tmp_path / "mine.py"
    path.write_text(MY_AGENT)
    argv = ["run", "--agent", "jittered_mean", "--problem", "coin/0", "--import", str(path)]
    assert main([*argv, "--set", "jiter=0.2"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "testbed: error: agent jittered_mean: unknown setting 'jiter' (did you mean "
        "'jitter'?); allowed: jitter, seed\n"
    )
    import agents
    from testbed.errors import InputError

    with pytest.raises(InputError, match=r"'JITTER' \(did you mean 'jitter'\?\)"):
        agents.load("jittered_mean", JITTER=1.0)
    with pytest.raises(InputError, match=r"unknown setting 'zzz'; allowed"):  # none close
        agents.load("jittered_mean", zzz=1.0)


# ----- the --import hint


@pytest.fixture
def without_example_names(scoped_registries):
    """The examples' names unregistered for one test (tests/test_examples.py registers them
    for the rest of its process: a worker that ran it first knew 'centroid')."""
    import agents
    from generative.registry import FAMILIES, SWEEPS

    for registry, name in ((agents.AGENTS, "centroid"), (FAMILIES, "threshold"),
                           (SWEEPS, "threshold")):  # fmt: skip
        registry._entries.pop(name, None)


@pytest.mark.parametrize("fast", [True, False])
def test_a_name_a_file_here_registers_gets_an_import_hint(
    fast, without_example_names, index, capsys, monkeypatch
):
    (index / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "my_agent.py", index / "examples")
    shutil.copy(ROOT / "examples" / "my_problem.py", index / "examples")
    cases = [
        (["run", "--agent", "centroid", "--problem", "coin/0"], "examples/my_agent.py has "
         "register('centroid'): add --import examples/my_agent.py"),
        (["run", "--agent", "uniform", "--problem", "threshold/3"], "examples/my_problem.py "
         "has register_family('threshold'): add --import examples/my_problem.py"),
        (["sweep", "--agent", "uniform", "--sweep", "threshold"], "examples/my_problem.py has "
         "register_sweep('threshold'): add --import examples/my_problem.py"),
    ]  # fmt: skip
    if not fast:
        monkeypatch.setenv(catalog.CATALOG_ENV, "off")
    for argv, hint in cases:
        if fast:
            status = catalog.fast_answer(_args(argv), max_jobs=MAX_JOBS, show=show_list)
        else:
            status = main(argv)
        err = capsys.readouterr().err
        assert status == 2 and err.rstrip().endswith(hint), err
    assert catalog.import_hint("agent", "nosuch") == ""
    (index / "elsewhere").mkdir()
    assert catalog.import_hint("agent", "centroid", cwd=index / "elsewhere") == ""


def test_the_hint_names_the_file_that_does_register(tmp_path, capsys, without_example_names):
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "my_agent.py", tmp_path / "examples")
    hint = catalog.import_hint("agent", "centroid", cwd=tmp_path)
    path = hint.rsplit("--import ", 1)[1]
    argv = ["run", "--agent", "centroid", "--problem", "coin/0", "--set", "zz=1"]
    assert main([*argv, "--import", str(tmp_path / path)]) == 2
    assert "agent centroid: unknown setting 'zz'" in capsys.readouterr().err  # registered


# ----- --seeds on an agent that takes no seed


def test_seeds_on_an_agent_without_a_seed_run_seed_0_only_and_say_so(
    tmp_path, capsys, caplog, scoped_registries
):
    import agents
    from leaderboard.execution.jobs import expand

    @agents.register("no_seed_setting", predicts="labels")
    def no_seed(train_data, prior_knowledge, *, scale: float = 1.0):
        raise NotImplementedError

    assert not agents.registry.takes_seed("uniform")  # its seed field is bookkeeping
    assert agents.registry.takes_seed("mlp")
    with caplog.at_level(logging.WARNING, logger="testbed.sweep"):
        jobs = expand(["uniform", "no_seed_setting", "mlp"], ["coin/0"], seeds=[0, 1, 2])
    seeds = {a: sorted(j.seed for j in jobs if j.agent == a) for a in {j.agent for j in jobs}}
    assert seeds == {"uniform": [0], "no_seed_setting": [0], "mlp": [0, 1, 2]}
    said = [r.getMessage() for r in caplog.records]
    assert any("agent uniform runs seed 0 only, not 1, 2" in m for m in said)
    assert any("agent no_seed_setting runs seed 0 only, not 1, 2" in m for m in said)
    results = str(tmp_path / "r.db")
    argv = ["sweep", "--agent", "uniform", "--problem", "coin/0", "--seeds", "0-2"]
    assert main([*argv, "--executor", "inline", "--results", results]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("1 job: 0 already stored, 1 ok")
    assert "testbed: warning: seeds: agent uniform runs seed 0 only, not 1, 2" in err
