"""The command line: tables, JSON, and one-line errors with exit status 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.cli import main


def test_run_json(capsys):
    assert main(["run", "--agent", "uniform", "--problem", "coin/2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["agent"] == "uniform" and out["settings"]["p"] == 0.2
    assert out["quality"]["kl_estimate"] > 0


def test_list_agents_table(capsys):
    assert main(["list", "agents"]) == 0
    assert "beta_bernoulli" in capsys.readouterr().out


def test_list_sweeps_json(capsys):
    assert main(["list", "sweeps", "--json"]) == 0
    sweeps = {r["sweep"]: r["problems"] for r in json.loads(capsys.readouterr().out)}
    assert sweeps["coin"] == 18


def test_list_problems_shows_id_forms_examples_and_sweeps(capsys):
    """Each family says how its ids are written, an example that loads, its sweeps and
    options."""
    import generative

    assert main(["list", "problems", "--json"]) == 0
    rows = {r["family"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) >= {"coin", "classification_2d", "regression", "sbi", "conjugate", "real"}
    assert rows["sbi"]["id form"] == (
        "sbi/<task>/<num_simulations>/<k>[/seeded][/iid<n>], k = 1..10, n = 1, 10, 100"
    )
    assert rows["sbi"]["example"] == "sbi/two_moons/1000/1"  # from its test sweep
    assert "sbi_test" in rows["sbi"]["sweeps"] and "sbi_two_moons" in rows["sbi"]["sweeps"]
    assert rows["classification_2d"]["id form"] == "classification_2d/<i>, i = 0..419"
    assert rows["real"]["example"] == "real/iris/1/1"
    # and the options `--option` takes for it (each loads an id of the family)
    assert rows["classification_2d"]["options"] == ["num_test_seeds", "num_enn_samples"]
    assert rows["coin"]["options"] == []
    for row in rows.values():
        if row["example"]:  # every example is an id of its family (settings parse)
            assert generative.problem_settings(row["example"])["family"] == row["family"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--agent", "nope", "--problem", "coin/1"], "agent: got 'nope'"),
        (["run", "--agent", "uniform", "--problem", "coin/x"], "problem id"),
        (["run", "--agent", "beta_bernoulli", "--problem", "coin/1", "--set", "zz=1"], "zz"),
        (["run", "--agent", "beta_bernoulli", "--problem", "coin/1", "--set", "a=x"], "a: got 'x'"),
        (["run", "--agent", "beta_bernoulli", "--problem", "coin/1", "--set", "a"], "key=value"),
        (["run", "--agent", "x", "--problem", "coin/1", "--import", "no/such.py"], "--import"),
        (["list", "agents", "--import", "no_such_module_here"], "no_such_module_here"),
        (
            ["run", "--agent", "mlp", "--problem", "coin/1", "--set", "hidden_sizes=abc"],
            "hidden_sizes: got 'abc'; allowed: a comma-separated list of integers (e.g. 50,50)",
        ),
        (
            ["run", "--agent", "mlp", "--problem", "coin/1", "--set", "hidden_sizes=50,"],
            "agent mlp: hidden_sizes: got '50,', which has an empty item; allowed: a "
            "comma-separated list of integers (e.g. 50,50)",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, said",
    [
        (["sweep", "--agent", "uniform,,beta_bernoulli", "--sweep", "coin"],
         "--agent: got 'uniform,,beta_bernoulli', which has an empty item; allowed: a "
         "comma-separated list of agent names"),
        (["sweep", "--agent", "uniform,", "--sweep", "coin"], "--agent: got 'uniform,', which "
         "has an empty item"),
        (["sweep", "--agent", "uniform", "--agent", "uniform", "--sweep", "coin"],
         "--agent: got 'uniform,uniform', which names uniform twice; allowed: each once"),
        (["sweep", "--agent", "uniform", "--problem", "coin/0,,coin/1"],
         "--problem: got 'coin/0,,coin/1', which has an empty item; allowed: a comma-separated "
         "list of problem ids"),
        (["sweep", "--agent", "uniform", "--problem", "coin/0", "--problem", "coin/0"],
         "--problem: got 'coin/0,coin/0', which names coin/0 twice"),
        (["run", "--agent", "uniform", "--problem", "coin/0", "--metrics", "joint_kl,,kl"],
         "--metrics: got 'joint_kl,,kl', which has an empty item"),
        (["run", "--agent", "uniform", "--problem", "coin/0", "--metrics", "kl,kl"],
         "--metrics: got 'kl,kl', which names kl twice"),
        (["list", "agents", "--import", "json,"], "--import: got 'json,', which has an empty item"),
        (["list", "agents", "--import", "json", "--import", "json"],
         "--import: got 'json,json', which names json twice"),
    ],
)  # fmt: skip
def test_an_empty_or_repeated_item_is_refused_in_one_line(
    argv, said, tmp_path, monkeypatch, capsys
):
    """A comma-separated option (or one given several times) dropped an empty item and
    ran a repeated one twice; now one reading (experiments.comma_lists) refuses both."""
    from leaderboard.execution import sweeping

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sweeping, "sweep", lambda *_, **__: pytest.fail("a sweep ran"))
    monkeypatch.setattr(sweeping, "run_one", lambda *_, **__: pytest.fail("a job ran"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"testbed: error: {said}"), err
    assert list(tmp_path.iterdir()) == []


def test_a_plugin_that_raises_is_one_line_exit_2(tmp_path, capsys):
    """A plugin that raises on import, or does not parse, was a traceback and exit 1."""
    raising = tmp_path / "raising_plugin.py"
    raising.write_text("import agents\nx = 1 / 0\n")
    broken = tmp_path / "broken_plugin.py"
    broken.write_text("def f(:\n")
    for path, message in (
        (raising, f"raised ZeroDivisionError: division by zero ({raising}:2)"),
        (broken, "raised SyntaxError: "),  # its wording varies between Pythons
    ):
        assert main(["list", "agents", "--import", str(path)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"({path}:" in err  # where it raised


def test_console_script_exit_status():
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "run", "--agent", "x", "--problem", "coin/1"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("testbed: error:") and proc.stderr.count("\n") == 1


def test_unknown_agent_error_names_every_agent(capsys):
    import agents

    assert main(["run", "--agent", "nope", "--problem", "coin/1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more)" not in err
    assert all(name in err for name in agents.names())  # none cut off, up to 'uniform'


@pytest.mark.parametrize("what", ["agents", "problems", "sweeps", "metrics"])
def test_list_json_is_machine_readable(what, capsys):
    assert main(["list", what, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    width = {"agents": 4, "metrics": 4, "problems": 6}.get(what, 2)  # predicts, options too
    assert rows and all(isinstance(r, dict) and len(r) == width for r in rows)
    if what == "agents":  # what each agent predicts, as a list (null: not declared)
        said = {r["agent"]: r["predicts"] for r in rows}
        assert said["uniform"] == ["labels", "real_values"] and said["npe"] == ["posterior"]
        # and how each acts in a bandit (null: it predicts no labels)
        bandit = {r["agent"]: r["in a bandit"] for r in rows}
        assert bandit["ensemble+"] == "online" and bandit["knn"] == "refit"
        assert bandit["oracle"] == "oracle" and bandit["npe"] is None


def test_closed_stdout_exits_quietly():
    # `testbed list ... | head`: a reader that has gone away is not a crash (no traceback).
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "list", "sweeps", "--json"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    assert proc.returncode == 141 and proc.stderr == ""


AGENT_FILE = """
import dataclasses

import jax.numpy as jnp

import agents


@dataclasses.dataclass(frozen=True)
class Zero:
    seed: int = 0


@agents.register("cli_file_agent", Zero)
def make(config):
    "Constant logits, registered from a file."
    return lambda data, prior: lambda x, key: jnp.zeros((x.shape[0], 2))
"""


def test_import_takes_a_py_file_on_run_and_list(tmp_path, capsys, monkeypatch):
    """--import accepts a path to a .py file (or a module name found from the working
    directory) on run and list, as on sweep."""
    (tmp_path / "cli_agent_file.py").write_text(AGENT_FILE)
    path = str(tmp_path / "cli_agent_file.py")
    assert main(["list", "agents", "--import", path]) == 0
    assert "cli_file_agent" in capsys.readouterr().out
    argv = ["run", "--agent", "cli_file_agent", "--problem", "classification_2d_test/0"]
    assert main([*argv, "--import", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["quality"]["kl_estimate"] > 0
    monkeypatch.chdir(tmp_path)  # a module name, found from the working directory
    assert main(["list", "agents", "--import", "cli_agent_file"]) == 0


def test_tables_are_never_cut_when_piped(capsys):
    """Off a terminal the table widens to its content: no name or text ends in an ellipsis."""
    assert main(["list", "agents"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert "Training-label class frequencies at every input." in out
    assert "│ average_class_probs │" in out


def test_ctrl_c_while_the_stack_imports_waits_for_the_block_then_stops():
    """A KeyboardInterrupt raised inside an import could leave a native library half
    initialised (a crash, or an import error later): while the stack loads it waits."""
    import os
    import signal
    import time

    from experiments.console import _interrupts_held

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        finished = []
        with pytest.raises(KeyboardInterrupt):
            with _interrupts_held():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # delivered by now: it must not raise here
                finished.append(True)
        assert finished == [True]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with _interrupts_held():  # nothing pending: nothing raised
            pass
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize(
    "script", ["reproduce_neural_testbed", "ship_neural_testbed", "reproduce_sbibm"]
)
def test_the_sweeping_scripts_end_an_interrupt_in_one_line(script, capsys, monkeypatch):
    """The experiment scripts that run sweeps answer Ctrl-C as `testbed` does: one line
    naming the script, status 130 (they printed a traceback)."""
    import importlib
    import signal

    from experiments.console import EXIT_INTERRUPTED, interruptible

    module = importlib.import_module(f"experiments.{script}")

    def interrupted_sweep(argv=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "main", interrupted_sweep)
    before = signal.getsignal(signal.SIGINT)  # default, or ignored in a background run
    assert interruptible(script, module.main) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == f"{script}: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is before  # put back
    source = Path(module.__file__).read_text()
    assert f'sys.exit(interruptible("{script}", main, ends_process=True))' in source


@pytest.mark.parametrize(
    "argv, named",
    [
        (["reproduce_neural_testbed", "--workers", "abc"], "--workers"),
        (["reproduce_sbibm", "--budgets"], "--budgets"),
        (["ship_neural_testbed", "run", "--workers", "abc"], "--workers"),
        (["ship_neural_testbed"], "command"),
    ],
)
def test_the_scripts_usage_errors_are_one_line_exit_2(argv, named, capsys):
    """A mistyped option of an experiment script is one line naming the script and the
    option, status 2, as `testbed`'s are (argparse printed its usage above it)."""
    import importlib

    module = importlib.import_module(f"experiments.{argv[0]}")
    with pytest.raises(SystemExit) as done:
        module.main(argv[1:])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{argv[0]}: error: ") and named in err, err


def test_a_one_job_sweep_says_job(capsys):
    from experiments.cli import _print_summary
    from leaderboard.execution.runner import SweepSummary

    _print_summary(SweepSummary(total=1, skipped=0, ran=1, ok=1, seconds=2.0), "r.db")
    assert capsys.readouterr().out.startswith("1 job: 0 already stored, 1 ok, 0 failed in 2.0 s")
