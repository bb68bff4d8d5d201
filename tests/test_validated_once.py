"""One validation path: `--import` modules imported once and passed down; `--seeds` parsed
once into `leaderboard.execution.seeds.AgentSeeds` (the size check's count, then the seeds) with the
words they always had; the command line's index reads seeds and words unknown names with
the library's own functions."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import agents
import leaderboard.execution.worker
from experiments import catalog
from experiments.cli import main
from leaderboard.execution import seeds as seeds_module
from leaderboard.execution.jobs import parse_seeds
from leaderboard.execution.seeds import AgentSeeds
from leaderboard.execution.sweeping import UserModules, count_seeds, import_modules, plan
from testbed.errors import InputError

COUNTING_MODULE = """
with open({path!r}, "a") as f:
    f.write("imported\\n")
"""


@pytest.fixture
def counted_module(tmp_path):
    """A user's module that notes each time it is executed, and the file of its notes."""
    notes = tmp_path / "imports.txt"
    module = tmp_path / "counted_user_module.py"
    module.write_text(COUNTING_MODULE.format(path=str(notes)))
    return module, notes


@pytest.fixture
def imports(monkeypatch):
    """The specs `leaderboard.execution.worker.import_user_module` is called on."""
    done: list[str] = []
    real = leaderboard.execution.worker.import_user_module

    def counting(spec):
        done.append(spec)
        return real(spec)

    monkeypatch.setattr(leaderboard.execution.worker, "import_user_module", counting)
    return done


def test_a_sweep_imports_its_modules_once(counted_module, imports, tmp_path, capsys):
    """`testbed sweep --import F`: the command line imports F and passes it on imported;
    the sweep's checks and its inline executor (this process) do not import it again."""
    module, notes = counted_module
    argv = ["sweep", "--agent", "uniform", "--problem", "coin/0", "--import", str(module),
            "--executor", "inline", "--results", str(tmp_path / "r.db"), "--json"]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["ok"] == 1
    assert imports == [str(module)]
    assert notes.read_text() == "imported\n"


def test_imported_modules_are_not_imported_again(counted_module, imports):
    module, notes = counted_module
    imported = import_modules([str(module)])
    assert imported == UserModules((str(module),)) and import_modules(imported) is imported
    jobs = plan(["beta_bernoulli"], ["coin/0"], imports=imported)
    assert len(jobs) == 1 and imports == [str(module)]
    assert notes.read_text() == "imported\n"


def test_a_sweeps_seeds_are_parsed_once(monkeypatch):
    """plan: the seeds' text is read once (the count, the check, the jobs use that)."""
    reads: list[str] = []
    real = seeds_module._of_text

    def counting(text):
        reads.append(text)
        return real(text)

    monkeypatch.setattr(seeds_module, "_of_text", counting)
    jobs = plan(["beta_bernoulli"], ["coin/0", "coin/1"], seeds="0-2,1")
    assert sorted({j.seed for j in jobs}) == [0, 1, 2] and len(jobs) == 6
    assert reads == ["0-2,1"]


ALLOWED = "integers >= 0 like 0,1,2 or a range like 0-4"
# (given, what the sweep's size check says, what the seeds are): as the three readings that
# AgentSeeds replaces said them (sweeping.count_seeds, jobs.parse_seeds), but an empty item,
# which they dropped, is refused as every comma-separated option's is
EMPTY = "which has an empty item; allowed: integers >= 0 like 0,1,2 or a range like 0-4"
SEEDS = [
    ("0", 1, [0]),
    ("0,2", 2, [0, 2]),
    ("1-3,3", 4, [1, 2, 3]),
    ("0-4,0-4", 10, [0, 1, 2, 3, 4]),
    (" 1 - 3 ", 3, [1, 2, 3]),
    ("0,", f"--seeds: got '0,', {EMPTY}", f"seeds: got '0,'; allowed: {ALLOWED}"),
    (",,3", f"--seeds: got ',,3', {EMPTY}", f"seeds: got ',,3'; allowed: {ALLOWED}"),
    ("+3", 1, [3]),
    ("1-+3", 1, [1, 2, 3]),
    ("1_0", 1, [10]),
    ("", 0, f"seeds: got ''; allowed: {ALLOWED}"),
    ("x", 1, f"seeds: got 'x'; allowed: {ALLOWED}"),
    ("1-b", 1, f"seeds: got '1-b'; allowed: {ALLOWED}"),
    ("0-", 1, f"seeds: got '0-'; allowed: {ALLOWED}"),
    ("-3", 1, f"seeds: got '-3'; allowed: {ALLOWED}"),
    (
        "0,5-2",
        "--seeds: got '0,5-2', whose range '5-2' runs backwards (it names no seed); allowed: "
        "ranges low-high such as 2-5",
        f"seeds: got '0,5-2'; allowed: {ALLOWED}; a range from low to high",
    ),
    (
        "3-1,x",
        "--seeds: got '3-1,x', whose range '3-1' runs backwards (it names no seed); allowed: "
        "ranges low-high such as 1-3",
        f"seeds: got '3-1,x'; allowed: {ALLOWED}",
    ),
    ("0-100000", 100001, "seeds: got '0-100000'; allowed: at most 100,000 seeds"),
    ("0-99999", 100000, list(range(100000))),
    (3, 1, [3]),
    (0, 1, [0]),
    (True, f"seeds: got True; allowed: {ALLOWED}", f"seeds: got True; allowed: {ALLOWED}"),
    (None, f"seeds: got None; allowed: {ALLOWED}", f"seeds: got None; allowed: {ALLOWED}"),
    ([2, 0, 2], 3, [2, 0]),
    ([0, -1], 2, "seeds: got [0, -1]; allowed: integers >= 0"),
    ((1, 2), 2, [1, 2]),
    (["a"], 1, "seeds: got ['a']; allowed: integers >= 0"),
    ([True], 1, "seeds: got [True]; allowed: integers >= 0"),
    ([], 0, []),
]


@pytest.mark.parametrize("given, count, values", SEEDS)
def test_seeds_are_counted_and_read_as_they_always_were(given, count, values):
    parsed = AgentSeeds.parse(given)
    for read, mine, expected in ((count_seeds, parsed.counted, count),
                                 (parse_seeds, parsed.values, values)):  # fmt: skip
        if isinstance(expected, str):  # the error message, word for word
            with pytest.raises(InputError) as said:
                read(given)
            assert str(said.value) == expected
        else:
            assert read(given) == mine() == expected


@pytest.mark.parametrize("given, count, values", [c for c in SEEDS if isinstance(c[0], str)])
def test_the_index_counts_seeds_as_the_library_does(given, count, values):
    """experiments.catalog answers a sweep only when its seeds are seeds (few of them), and
    counts them as the size check does."""
    few = catalog._few_seeds(given)
    fine = isinstance(count, int) and not isinstance(values, str)
    assert few == (count if fine and 0 < count <= catalog.MAX_SEEDS_HERE else None)


def test_the_index_words_unknown_names_with_the_registries_functions():
    from testbed.config import did_you_mean
    from testbed.errors import MAX_LISTED
    from testbed.registry import unknown_name

    names = [f"agent_{i}" for i in range(MAX_LISTED + 5)] + ["mlp"]
    for name in ("MLP", "agent_1x", "nothing_close"):
        assert catalog.unknown_name("agent", name, names, MAX_LISTED) == str(
            unknown_name("agent", name, names)
        )
        assert catalog._names.did_you_mean(name, names) == did_you_mean(name, names)


def test_the_index_runs_the_librarys_own_checks_of_names_and_settings():
    """One validation path (issue 58): the index's errors of an unknown setting or --set key
    come from the functions the library raises with (testbed/names.py, loaded by its file),
    not from a copy of their words."""
    import testbed.names
    from leaderboard.execution.jobs import expand
    from testbed.config import coerce_fields

    assert Path(catalog._names.__file__).resolve() == Path(testbed.names.__file__).resolve()
    with pytest.raises(InputError) as library:
        expand(["uniform", "mlp"], ["coin/0"], overrides={"num_batchs": 5})
    fields = {n: [f.name for f in dataclasses.fields(agents.AGENTS.get(n).config_cls)]
              for n in ("uniform", "mlp")}  # fmt: skip
    assert str(library.value) == catalog._names.unused_override(fields, ["num_batchs"])
    assert str(library.value).startswith(
        "set num_batchs: no agent among uniform, mlp has this field (did you mean "
        "'num_batches'?); allowed: uniform: (none); mlp: "
    )
    config_cls = agents.AGENTS.get("mlp").config_cls
    with pytest.raises(InputError) as library:
        coerce_fields(config_cls, {"learning_rat": "0.1"}, where="agent mlp")
    settings = [f.name for f in dataclasses.fields(config_cls)]
    assert str(library.value) == catalog._names.unknown_setting(
        "agent mlp: ", "learning_rat", settings
    )
    assert str(library.value).startswith(  # the words users have always read
        "agent mlp: unknown setting 'learning_rat' (did you mean 'learning_rate'?); allowed: "
    )
