"""nutpie's compiled code kept on disk (agents/ppl/nutpie_compile.py).

Fast: a kept file that cannot be loaded is set aside, a folder that cannot be written keeps
nothing, and the key names what the code is compiled from (the same for two problems of one
shape, another for another dimension or another numba, none without PyTensor's key), with
no compilation. Slow: fresh processes, as a user runs them: the first compiles, the
second loads the code, a damaged file is set aside and compiled again, and every run draws
what `nutpie.compile_pymc_model` draws for the same problem and seed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import generative
from agents.ppl import nutpie_compile, pymc_agent
from agents.ppl.spec import translate

ROOT = Path(__file__).resolve().parents[1]


# ---- fast: the file, the folder, the key ------------------------------------------------


def test_a_file_that_cannot_be_loaded_is_set_aside(tmp_path):
    pytest.importorskip("numba")
    from numba.core.registry import cpu_target

    context = cpu_target.target_context
    kept = nutpie_compile.KeptCode(tmp_path / "k-logp.nbc")
    assert kept.load_overload(None, context) is None  # none kept: nothing set aside
    assert list(tmp_path.iterdir()) == []
    not_a_pickle = b"not numba's payload"
    for content in (
        b"",  # empty
        b"\x00" * 100,  # garbage: fails its checksum
        hashlib.sha256(not_a_pickle).digest() + not_a_pickle,  # passes it, cannot be loaded
    ):
        kept.path.write_bytes(content)
        assert kept.load_overload(None, context) is None
        assert not kept.path.exists()
        assert (tmp_path / "k-logp.nbc.bad").read_bytes() == content


def test_a_folder_that_cannot_be_written_keeps_nothing(tmp_path):
    class Library:
        has_dynamic_globals = False

    class Compiled:
        library, lifted = Library(), ()

        def _reduce(self):
            return ("payload",)

    pytest.importorskip("numba")
    (tmp_path / "file").write_text("")
    nutpie_compile.KeptCode(tmp_path / "file" / "k.nbc").save_overload(None, Compiled())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    nutpie_compile.KeptCode(tmp_path / "k.nbc").save_overload(None, Compiled())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "k.nbc"]


def _require_nutpie() -> None:
    """Skip without nutpie, or with a nutpie compiled as nutpie does (nothing kept); else
    PyMC imported as the agent imports it (its BLAS set first)."""
    if importlib.util.find_spec("nutpie") is None:
        pytest.skip("nutpie is not installed")
    if not version("nutpie").startswith(nutpie_compile.REPLICATED):
        pytest.skip("this nutpie is compiled as nutpie does: nothing is kept")
    pymc_agent.import_pymc("nutpie")


def _keys(pid: str, monkeypatch) -> list:
    """The names the model of problem `pid` keeps its two callbacks under (none compiled)."""
    pm = pymc_agent.import_pymc("nutpie")
    problem = generative.load(f"conjugate/{pid}", use_c2st=False)
    model = translate(problem.family, problem.x, problem.y)
    names = []
    monkeypatch.setattr(nutpie_compile, "_cfunc", lambda fn, sig, folder, name: names.append(name))
    nutpie_compile.compile_pymc_model(pymc_agent.build_model(pm, model), folder=Path("unused"))
    return names


def test_the_key_names_what_the_code_is_compiled_from(monkeypatch):
    _require_nutpie()
    import pytensor

    key = _keys("wyb/16", monkeypatch)
    assert [name.split("-")[1] for name in key] == ["logp", "expand"]
    assert key[0].split("-")[0] == key[1].split("-")[0]
    assert _keys("wyb/17", monkeypatch) == key  # the same shape, other data and hyperparameters
    assert _keys("wyb/7", monkeypatch) == _keys("wyb/12", monkeypatch)  # n = 10 and 100
    assert _keys("wyb/21", monkeypatch) != key  # 10-d
    assert _keys("blr/3", monkeypatch) != key  # another family
    real = nutpie_compile.version
    monkeypatch.setattr(nutpie_compile, "version", lambda p: "0" if p == "numba" else real(p))
    assert _keys("wyb/16", monkeypatch) != key  # another numba
    monkeypatch.setattr(nutpie_compile, "version", real)
    with pytensor.config.change_flags(numba__cache=False):  # PyTensor's cache off: no key
        assert _keys("wyb/16", monkeypatch) == [None, None]


# ---- slow: fresh processes ------------------------------------------------------------

RUN = """
import json, sys
from pathlib import Path
import agents, testbed
from agents.ppl import nutpie_compile, pymc_agent
from generative.conjugate import PROBLEMS, ConjugateProblem

def problem(pid):  # "wyb/17@20": wyb/17's model and seed, 20 observations
    name, _, n = pid.partition("@")
    spec = PROBLEMS[name]
    return ConjugateProblem(pid, spec["family"], int(n or spec["num_train"]), spec["seed"])

nutpie_compile.cache_folder = lambda: Path(sys.argv[1])
agent = agents.load("nutpie", num_warmup=100, num_samples=100, seed=3)
out = {"draws": {}}
for pid in sys.argv[2].split(","):
    run = testbed.train(agent, problem(pid))
    out["draws"][pid] = run.draws.tolist()
    out.setdefault("compile_seconds", run.diagnostics["compile_seconds"])
out["hits"] = [  # each model the process compiled (one a shape): 1 = loaded, 0 = compiled
    [model.compiled_logp_func.cache_hits, model.compiled_expand_func.cache_hits]
    for _, model in pymc_agent.NUTPIE_MODELS._models.values()
]
if sys.argv[3:]:  # runs on nutpie's own compile, each problem's model compiled in turn
    import nutpie
    pymc_agent.compile_pymc_model = nutpie.compile_pymc_model
    out["nutpie"] = {}
    for pid in sys.argv[3].split(","):
        pymc_agent.NUTPIE_MODELS.clear()
        out["nutpie"][pid] = testbed.train(agent, problem(pid)).draws.tolist()
print(json.dumps(out))
"""


def _fresh_process(folder: Path, problems: str, *more: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", RUN, str(folder), problems, *more],
        capture_output=True, text=True, timeout=900, cwd=folder.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_later_process_loads_the_code_and_draws_the_same(tmp_path):
    """wyb/16 and wyb/17: one shape (2-d, n = 50), other hyperparameters, so wyb/17 samples
    the model wyb/16 compiled in its process; wyb/17@20: wyb/17 with n = 20, another shape
    with the same code (sizes are read at run time). Every run's draws are those of
    nutpie's own compile of the problem's model."""
    _require_nutpie()
    folder = tmp_path / "nutpie"
    problems = "wyb/16,wyb/17,wyb/17@20"
    first = _fresh_process(folder, "wyb/16", problems)
    assert first["hits"] == [[0, 0]]  # compiled, and nutpie's own compile draws the same
    assert first["draws"]["wyb/16"] == first["nutpie"]["wyb/16"]
    kept = sorted(path.name.split("-")[1] for path in folder.iterdir())
    assert kept == ["expand.nbc", "logp.nbc"]

    second = _fresh_process(folder, problems)
    assert second["hits"] == [[1, 1], [1, 1]]  # (n = 50, n = 20): both load wyb/16's code
    assert second["draws"] == first["nutpie"]
    assert second["compile_seconds"] < first["compile_seconds"] / 3, (first, second)

    (logp,) = folder.glob("*-logp.nbc")
    logp.write_bytes(logp.read_bytes()[:5000])  # torn
    third = _fresh_process(folder, "wyb/17")
    assert third["hits"] == [[0, 1]]  # set aside and compiled again; expand loaded
    assert logp.with_name(logp.name + ".bad").exists() and logp.exists()
    assert third["draws"]["wyb/17"] == first["nutpie"]["wyb/17"]
