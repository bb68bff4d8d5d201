"""The HTML report: self-contained, escaped, and checked in headless Chromium."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import leaderboard_faults  # noqa: F401  (registers lbfault_sbi settings for the c2st rows)
import pytest

from experiments.cli import main
from leaderboard.jobs import Job
from leaderboard.store import ResultsStore

EVIL = "<img src=x onerror=\"console.error('xss')\">&$x$"
PLOTS = {"kl-by-agent", "kl-vs-num-train", "c2st-vs-budget", "runtimes"}
TABLES = {"kl-tau-1", "kl-tau-5", "c2st", "timings", "failures", "configs"}
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const out = {
    tables: Object.fromEntries([...document.querySelectorAll('table[data-table]')]
      .map(t => [t.dataset.table, t.tBodies[0].rows.length])),
    plots: Object.fromEntries([...document.querySelectorAll('figure[data-plot]')]
      .map(f => { const i = f.querySelector('img');
                  return [f.dataset.plot, i.complete ? i.naturalWidth : 0]; })),
    external: imgs.filter(i => !i.src.startsWith('data:image/png;base64,')).length,
    text: document.body.innerText,
  };
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body>"""


def _record(store, agent, pid, status="ok", error=None, **metrics):
    job = Job.make(agent, {}, pid).as_dict()
    store.record({**job, "status": status, "error": error, "metrics": metrics, "wall_seconds": 1.0})


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    db = folder / "r.db"
    with ResultsStore(db) as s:
        for i in range(18):  # coin/0..8: tau=1, coin/9..17: tau=5
            _record(s, "uniform", f"coin/{i}", kl_estimate=0.4, test_acc=0.5)
            _record(s, EVIL, f"coin/{i}", kl_estimate=0.1 + 0.01 * i, train_seconds=0.2)
        for task in ("two_moons", EVIL):
            for budget in (1000, 10000):
                for obs in (1, 2, 3):
                    pid = f"lbfault_sbi/{task}/{budget}/{obs}"
                    _record(s, "npe", pid, c2st=0.9 - 0.1 * (budget // 10000) + 0.01 * obs)
        _record(s, "oracle", "coin/0", status="failed", error=EVIL)
    out = folder / "report.html"
    assert main(["report", "--results", str(db), "--out", str(out)]) == 0
    return out


def test_report_is_self_contained_and_escaped(report):
    text = report.read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert EVIL not in text and html.escape(EVIL, quote=True) in text
    for name in PLOTS:
        assert f'data-plot="{name}"><img' in text
    for name in TABLES:
        assert f'data-table="{name}"' in text


def _chromium() -> str | None:
    return next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )


def _run_chromium(path) -> subprocess.CompletedProcess:
    args = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
        "--v=0", "--virtual-time-budget=5000", "--dump-dom", path.resolve().as_uri(),
    ]  # fmt: skip
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def _console(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.skipif(
    _chromium() is None,
    reason="Chromium not installed here (CI installs it: apt-get install -y chromium)",
)
def test_report_in_headless_chromium(report, tmp_path):
    # The check can fail: a page with a console error and an exception is caught.
    control = tmp_path / "control.html"
    control.write_text("<html><body><script>console.error('x'); nope();</script></body></html>")
    assert len(_console(_run_chromium(control))) == 2

    assert _console(_run_chromium(report)) == []  # no console output at all (no scripts)

    probed = tmp_path / "probed.html"
    probed.write_text(report.read_text().replace("</body>", PROBE))
    proc = _run_chromium(probed)
    assert _console(proc) == []
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stdout[-2000:]
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["external"] == 0  # the escaped <img src=x> never became an element
    assert set(probe["plots"]) == PLOTS and all(w > 100 for w in probe["plots"].values())
    assert TABLES <= set(probe["tables"])
    assert probe["tables"]["kl-tau-1"] == 2 and probe["tables"]["failures"] == 1
    assert probe["tables"]["c2st"] == 4  # 2 tasks x 2 budgets for npe
    assert EVIL in probe["text"]  # shown as text, verbatim
