"""The tutorial notebooks of `notebooks/` run end to end, as a reader runs them.

Each notebook runs in a fresh Jupyter kernel (nbclient) in a temporary folder, with the
repository first on the kernel's path, its install cell (tagged `install`, kept commented)
left out; a cell that raises fails the test, and every cell has its own time limit. The
kernel runs its cells inside a running event loop, as Jupyter does: this is where PyStan's
`asyncio.run` would fail (`tests/test_ppl_event_loop.py` checks every PPL agent there).
`your_agent_on_the_testbed` runs in the default tier; the SBI and PPL notebooks (a minute
or more each, Stan's first compilation half a minute) in the slow one.

Fast: every notebook opens with a markdown cell, then the install sentence and its one
commented install line; no other cell installs anything; the stored outputs hold no error;
each notebook is in the site's nav.

`python tests/test_notebooks.py [NAME ...]` runs the notebooks (all by default) and stores
their outputs in the files, as the site shows them (mkdocs-jupyter, `execute: false`).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("*.ipynb"))
SLOW = {"sbi_posterior_c2st_lc2st", "ppl_against_exact"}
CELL_TIMEOUT = 600  # seconds a cell may take (Stan's first compilation included)
INSTALL_TAG = "install"
# what each notebook's outputs must say (besides running without an error)
EXPECTED = {
    "your_agent_on_the_testbed": ["jittered_centroids", "(ours, shipped)", "yours", "2 ok"],
    "sbi_posterior_c2st_lc2st": ["C2ST", "p-value", "rejected"],
    "ppl_against_exact": ["stan", "pymc", "exact", "PIT-KS p"],
}


def _read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


def is_install_cell(cell) -> bool:
    return INSTALL_TAG in cell.metadata.get("tags", [])


def execute(path: Path, folder: str | os.PathLike):
    """The notebook at `path` run in `folder` (its install cells kept, not run): the
    notebook with its outputs. A cell that raises raises `CellExecutionError`."""
    import nbformat
    from nbclient import NotebookClient

    nb = _read(path)
    run = nbformat.from_dict(nb)
    run.cells = [c for c in nb.cells if not is_install_cell(c)]
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "OMP_NUM_THREADS")}
    paths = [str(ROOT), *filter(None, [saved["PYTHONPATH"]])]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)  # the kernel imports this repository
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # two tests may run at once on two cores
    try:
        client = NotebookClient(
            run,
            timeout=CELL_TIMEOUT,
            kernel_name="python3",
            record_timing=False,
            resources={"metadata": {"path": str(folder)}},
        )
        client.execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    done = iter(run.cells)
    nb.cells = [c if is_install_cell(c) else next(done) for c in nb.cells]
    return nb


def output_text(nb) -> str:
    """Every text output of the notebook's cells, joined."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts.extend(v for k, v in out.get("data", {}).items() if k.startswith("text/"))
    return "\n".join(p if isinstance(p, str) else "".join(p) for p in parts)


def _params(slow: set[str]) -> list:
    return [
        pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem in slow else [])
        for p in NOTEBOOKS
    ]


# ---- fast: the notebooks' shape -----------------------------------------------------------


def test_the_notebooks_are_the_expected_ones():
    assert {p.stem for p in NOTEBOOKS} == set(EXPECTED)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_opens_with_prose_then_its_one_commented_install_line(path):
    import nbformat

    nb = _read(path)
    nbformat.validate(nb)
    title, sentence, install, *rest = nb.cells
    assert title.cell_type == "markdown" and title.source.startswith("# ")
    assert sentence.cell_type == "markdown" and "from a clone" in sentence.source
    assert install.cell_type == "code" and is_install_cell(install)
    assert re.fullmatch(r'# !pip install -c constraints\.txt -e "\.(\[\w+\])?"', install.source)
    assert not install.get("outputs")
    for cell in rest:  # nothing else installs, nothing else is skipped by the tests
        assert not is_install_cell(cell)
        assert "pip install" not in cell.source or cell.cell_type == "markdown"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_stored_outputs_hold_no_error(path):
    """The site shows the stored outputs: a traceback there would be shown as it is."""
    outputs = [o for c in _read(path).cells for o in c.get("outputs", [])]
    assert outputs, "run `python tests/test_notebooks.py` to store the outputs"
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr" and "Traceback" in o.text]


def test_every_notebook_is_in_the_sites_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for path in NOTEBOOKS:
        assert f"notebooks/{path.name}" in nav, path.name
    assert (ROOT / "docs" / "notebooks").resolve() == FOLDER


# ---- the notebooks run ------------------------------------------------------------------


def test_the_runner_skips_install_cells_and_fails_on_a_failing_cell(tmp_path):
    """The runner itself, on a two-notebook toy: the install cell (which would fail here)
    is left out and kept in the result; a cell that raises fails the run."""
    import nbformat
    from nbclient.exceptions import CellExecutionError
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    install = new_code_cell("raise SystemExit('the install cell ran')")
    install.metadata["tags"] = [INSTALL_TAG]
    cells = [new_markdown_cell("# toy"), install, new_code_cell("import testbed, os\nos.getcwd()")]
    good, bad = tmp_path / "good.ipynb", tmp_path / "bad.ipynb"
    nbformat.write(new_notebook(cells=cells), good)
    nbformat.write(new_notebook(cells=[*cells, new_code_cell("1 / 0")]), bad)
    run = tmp_path / "run"
    run.mkdir()
    nb = execute(good, run)
    assert [c.source for c in nb.cells] == [c.source for c in cells]
    assert not nb.cells[1].get("outputs") and str(run) in output_text(nb)  # ran in `run`
    with pytest.raises(CellExecutionError, match="ZeroDivisionError"):
        execute(bad, run)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("path", _params(SLOW))
def test_the_notebook_runs_end_to_end(path, tmp_path):
    start = time.perf_counter()
    nb = execute(path, tmp_path)
    text = output_text(nb)
    missing = [s for s in EXPECTED[path.stem] if s not in text]
    assert not missing, (missing, text[-2000:])
    print(f"{path.stem}: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":  # store the outputs of the notebooks named (default: all)
    import nbformat

    for path in [FOLDER / f"{n}.ipynb" for n in sys.argv[1:]] or NOTEBOOKS:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            nbformat.write(execute(path, folder), path)
        print(f"{path.name}: {time.perf_counter() - start:.0f} s")
