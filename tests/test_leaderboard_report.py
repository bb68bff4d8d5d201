"""The HTML report: self-contained, escaped, self-explaining, checked in headless Chromium
at a desktop and a narrow width (layout read back from the DOM), and written even when
every job failed."""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser

import leaderboard_faults  # noqa: F401  (registers lbfault_sbi settings for the c2st rows)
import pytest

import leaderboard
from experiments.cli import main
from leaderboard.execution.jobs import Job
from leaderboard.ranking import board as lb
from leaderboard.ranking.report import (
    plot_by_agent,
    plot_runtimes,
    plot_vs_budget,
    plot_vs_num_train,
    render_report,
)
from leaderboard.store import ResultsStore

EVIL = "<img src=x onerror=\"console.error('xss')\">&$x$"
TRACE = f'Traceback (most recent call last):\n  File "agent.py", line 3\nValueError: {EVIL}'
PLOTS = {
    "kl-by-agent",
    "kl-vs-num-train",
    "nll-by-agent",
    "nll-vs-num-train",
    "c2st-vs-budget",
    "runtimes",
}
TABLES = {
    "kl-tau-1",
    "kl-tau-5",
    "nll-tau-1",
    "nll-tau-10",
    "c2st",
    "c2st-per-observation",
    "timings",
    "failures",
    "configs",
}
RANKINGS = ("kl-tau-1", "kl-tau-5", "nll-tau-1", "nll-tau-10", "c2st")

# Injected into a copy of the report only (the report itself has no scripts). It reads the
# layout back: boxes that overlap (the page's blocks; the cells of each table; the parts
# of each legend and figure), boxes outside the viewport, headers without a tooltip or a
# legend line, and the page's width against the viewport's. In a frame it posts its answer
# to the host page; alone it appends it to the page (read with --dump-dom).
PROBE = """<script>
window.addEventListener('load', () => {
  const box = e => e.getBoundingClientRect();
  const name = e => e.tagName.toLowerCase() + '[' + (e.dataset.table || e.dataset.plot ||
      e.dataset.legend || '') + ']:' + (e.textContent || '').trim().slice(0, 40);
  const overlapping = els => {
    const found = [], boxes = els.map(box);
    for (let i = 0; i < els.length; i++) for (let j = i + 1; j < els.length; j++) {
      const a = boxes[i], b = boxes[j];
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) found.push([name(els[i]), name(els[j])]);
    }
    return found;
  };
  const blocks = [...document.body.children].filter(e => e.tagName !== 'SCRIPT');
  const overlaps = overlapping(blocks);
  for (const t of document.querySelectorAll('table'))
    overlaps.push(...overlapping([...t.querySelectorAll('th, td')]));
  for (const g of document.querySelectorAll('dl.legend, figure'))
    overlaps.push(...overlapping([...g.children]));
  const terms = new Set([...document.querySelectorAll('dl.legend dt')]
    .map(d => d.textContent.trim()));
  const width = document.documentElement.clientWidth;
  const out = {
    width,
    scrollWidth: document.documentElement.scrollWidth,
    overlaps,
    outside: [...document.querySelectorAll('body > *, .scroll, figure img, dl.legend')]
      .filter(e => box(e).left < -0.5 || box(e).right > width + 0.5).map(name),
    unexplained: [...document.querySelectorAll('th')]
      .filter(th => !(th.title || '').trim() && !terms.has(th.textContent.trim()))
      .map(th => th.textContent),
    headers: document.querySelectorAll('th').length,
    tables: Object.fromEntries([...document.querySelectorAll('table[data-table]')]
      .map(t => [t.dataset.table, t.tBodies[0].rows.length])),
    plots: Object.fromEntries([...document.querySelectorAll('figure[data-plot]')]
      .map(f => { const i = f.querySelector('img');
                  return [f.dataset.plot, i.complete ? i.naturalWidth : 0]; })),
    shown: Object.fromEntries([...document.querySelectorAll('figure[data-plot] img')]
      .map(i => [i.parentElement.dataset.plot, box(i).width])),
    external: [...document.images].filter(i => !i.src.startsWith('data:image/png;base64,'))
      .length,
    text: document.body.innerText,
  };
  if (window.parent !== window) { window.parent.postMessage(JSON.stringify(out), '*'); return; }
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body>"""
# A page that shows the report in a frame of a given width (Chromium's headless window is
# at least 500 px wide, so narrower layouts are checked in a frame).
HOST = """<!DOCTYPE html><html><body style="margin:0">
<iframe src="{src}" style="width:{width}px;height:{height}px;border:0;display:block"></iframe>
<script>addEventListener('message', e => {{
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = e.data;
  document.body.appendChild(pre); }});</script></body></html>"""


def _record(store, agent, pid, status="ok", error=None, traceback=None, **metrics):
    job = Job.make(agent, {}, pid).as_dict()
    store.record(
        {
            **job,
            "status": status,
            "error": error,
            "traceback": traceback,
            "metrics": metrics,
            "wall_seconds": 1.0,
        }
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    db = folder / "r.db"
    with ResultsStore(db) as s:
        for i in range(18):  # coin/0..8: tau=1, coin/9..17: tau=5
            seconds = 9.0 if i == 0 else 0.05  # the first job also compiled
            _record(
                s,
                "uniform",
                f"coin/{i}",
                kl_estimate=0.4,
                test_acc=0.5,
                evaluation_seconds=seconds,
                train_seconds=0.001,
            )
            kl = 7.917e-05 if i == 0 else 0.1 + 0.01 * i
            _record(s, EVIL, f"coin/{i}", kl_estimate=kl, train_seconds=0.2)
        for tau in (1, 10):  # real data: a joint NLL, ranked as the KL is
            _record(s, "uniform", f"real/iris/{tau}/0", joint_nll=1.0986 * tau)
            _record(s, EVIL, f"real/iris/{tau}/0", joint_nll=0.5 * tau)
        for task in ("two_moons", EVIL):
            for budget in (1000, 10000):
                for obs in (1, 2, 3):
                    pid = f"lbfault_sbi/{task}/{budget}/{obs}"
                    _record(s, "npe", pid, c2st=0.9 - 0.1 * (budget // 10000) + 0.01 * obs)
        _record(s, "oracle", "coin/0", status="failed", error=EVIL, traceback=TRACE)
    out = folder / "report.html"
    assert main(["report", "--results", str(db), "--out", str(out)]) == 0
    return out


class _Page(HTMLParser):
    """Tables (headers with their titles, cell texts), legends and captions of a page."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: dict[str, dict] = {}
        self.legends: dict[str, list[str]] = {}
        self.captions: dict[str, str] = {}
        self.headings: list[str] = []
        self._table = self._legend = self._figure = None
        self._cell: list[str] | None = None
        self._tag = ""
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("data-table")
            self.tables[self._table] = {"headers": [], "titles": [], "rows": []}
        elif tag == "tr" and self._table:
            self.tables[self._table]["rows"].append([])
        elif tag in ("th", "td") and self._table:
            self._cell, self._tag = [], tag
            if tag == "th":
                self.tables[self._table]["titles"].append(a.get("title"))
        elif tag == "dl":
            self._legend = a.get("data-legend")
            self.legends[self._legend] = []
        elif tag == "dt" and self._legend:
            self._cell, self._tag = [], "dt"
        elif tag == "figure":
            self._figure = a.get("data-plot")
        elif tag == "figcaption" or tag in ("h2", "h3"):
            self._cell, self._tag = [], tag

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag == "dl":
            self._legend = None
        if self._cell is None or tag != self._tag:
            return
        text = "".join(self._cell).strip()
        self._cell = None
        if tag == "th":
            self.tables[self._table]["headers"].append(text)
        elif tag == "td":
            self.tables[self._table]["rows"][-1].append(text)
        elif tag == "dt":
            self.legends[self._legend].append(text)
        elif tag == "figcaption":
            self.captions[self._figure] = text
        else:
            self.headings.append(text)

    def rows(self, table: str) -> list[list[str]]:
        return [r for r in self.tables[table]["rows"] if r]


def test_report_is_self_contained_and_escaped(report):
    text = report.read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert EVIL not in text and html.escape(EVIL, quote=True) in text
    for name in PLOTS:
        assert f'data-plot="{name}"><img' in text
    for name in TABLES:
        assert f'data-table="{name}"' in text


def test_report_explains_itself(report):
    page = _Page(report.read_text())
    text = report.read_text()
    assert "lower is better unless a legend says otherwise" in text
    assert "(0 = the environment&#x27;s own predictive)" in text  # what a good KL is
    for name in RANKINGS:  # a rank column, 1 = best
        table = page.tables[name]
        assert "rank" in table["headers"][:3], (name, table["headers"])
        ranks = [r[table["headers"].index("rank")] for r in page.rows(name)]
        assert ranks[0] == "1" and all(r.isdigit() for r in ranks)
    for name, table in page.tables.items():  # every header explains itself
        assert all(t and t.strip() for t in table["titles"]), (name, table["titles"])
    kl = page.tables["kl-tau-1"]
    assert kl["headers"][:3] == ["rank", "agent", "KL/norm"] and "health" in kl["headers"]
    assert "health" in page.legends["kl"] and "KL/norm" in page.legends["kl"]
    health = kl["titles"][kl["headers"].index("health")]
    assert "usable score" in health and "counts against it" in health
    assert "lower is better" in kl["titles"][kl["headers"].index("KL/norm")]
    assert page.rows("kl-tau-1")[0][kl["headers"].index("health")] == "100%"
    # real data: a joint NLL, headed as one
    for name in ("nll-tau-1", "nll-tau-10"):
        headers = page.tables[name]["headers"]
        assert "NLL/norm" in headers and "NLL" in headers
        assert not any("KL" in h for h in headers), headers
    assert any(
        h.startswith("joint NLL (real data): marginal (tau = 1) and joint") for h in page.headings
    )
    # one number format: fixed notation, never an exponent (7.917e-05 -> 0.00007917)
    cells = [
        c for t in ("kl-tau-1", "kl-tau-5", "c2st", "timings") for r in page.rows(t) for c in r
    ]
    assert not [c for c in cells if re.fullmatch(r"-?[\d.]+e[+-]?\d+", c)]
    # tau = 1 and 5 ran: the caption says marginal and joint
    assert "marginal (tau = 1) and joint (tau = 5)" in page.captions["kl-by-agent"]
    # the captions name the score, never a table of one tau
    for plot in ("kl-by-agent", "kl-vs-num-train"):
        caption = page.captions[plot]
        assert "KL" in caption and "kl-tau" not in caption, caption


def test_runtimes_are_medians_and_say_why(report):
    page = _Page(report.read_text())
    timings = page.tables["timings"]
    uniform = next(r for r in page.rows("timings") if r[0] == "uniform")
    median = uniform[timings["headers"].index("eval s (median)")]
    mean = uniform[timings["headers"].index("eval s (mean)")]
    assert median == "0.05" and float(mean) == pytest.approx((9 + 17 * 0.05) / 18, rel=1e-3)
    assert "median" in page.captions["runtimes"] and "compile" in page.captions["runtimes"]
    kl = page.tables["kl-tau-1"]  # the ranking shows the median too, headed so
    assert "eval s (median)" in kl["headers"] and "eval s" not in kl["headers"]
    row = next(r for r in page.rows("kl-tau-1") if r[1] == "uniform")
    assert row[kl["headers"].index("eval s (median)")] == "0.05"


def _coin_board(tmp_path, taus=(1,), agents=("uniform", "mlp")):
    db = tmp_path / "coin.db"
    with ResultsStore(db) as s:
        for i in range(18):
            pid = f"coin/{i}"
            if (5 if i >= 9 else 1) not in taus:
                continue
            for k, agent in enumerate(agents):
                _record(
                    s,
                    agent,
                    pid,
                    kl_estimate=0.1 * (k + 1),
                    train_seconds=0.1 * (k + 1),
                    evaluation_seconds=0.01,
                    test_acc=0.5,
                )
    return leaderboard.build(db)


def test_a_marginal_only_report_never_speaks_of_joint_predictions(tmp_path):
    page = _Page(render_report(_coin_board(tmp_path, taus=(1,))))
    assert "marginal predictions (tau = 1)" in page.captions["kl-by-agent"]
    assert not [h for h in page.headings if "joint" in h.lower()], page.headings
    assert "joint" not in page.captions["kl-by-agent"].lower()


def test_each_panel_names_its_own_score(tmp_path):
    """A tau = 1 panel's axis says marginal KL, a tau = 5 panel's joint KL."""
    board = _coin_board(tmp_path, taus=(1, 5))
    fig = plot_by_agent(board.rankings)
    labels = [ax.get_xlabel() for ax in fig.axes]
    assert labels == ["marginal KL / uniform's", "joint KL / uniform's"], labels


def test_the_header_names_agents_that_finished_no_job(tmp_path):
    """An agent that failed on every problem has no score to rank: the header counted it
    among the agents while the tables showed the others, with no word why."""
    db = tmp_path / "r.db"
    with ResultsStore(db) as s:
        for i in range(3):
            _record(s, "uniform", f"coin/{i}", kl_estimate=0.2)
            _record(s, "nanner", f"coin/{i}", status="failed", error="non-finite metrics")
    text = render_report(leaderboard.build(db))
    assert "2 agents (1 with no finished job: nanner; not ranked, their failures below)" in text


def _legends_clear(fig) -> None:
    """Every legend of `fig` is drawn clear of every panel and every bar."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            if not ax.get_visible():
                continue
            assert not box.overlaps(ax.get_window_extent(renderer)), "legend over a panel"
            for patch in ax.patches:
                assert not box.overlaps(patch.get_window_extent(renderer)), "legend over a bar"


def test_plot_legends_never_cover_the_data(tmp_path, report):
    import matplotlib

    matplotlib.use("Agg", force=True)
    board = _coin_board(tmp_path, taus=(1, 5), agents=[f"agent_{k}" for k in range(5)])
    timing = lb.runtimes(board.df)
    assert len(timing) == 5
    _legends_clear(plot_runtimes(timing))
    _legends_clear(plot_vs_num_train(board, board.rankings))
    full = leaderboard.build(report.parent / "r.db")
    _legends_clear(plot_vs_budget(next(r for r in full.rankings if r.observations)))


def test_report_of_a_store_where_every_job_failed(tmp_path, capsys):
    db = tmp_path / "failed.db"
    with ResultsStore(db) as s:
        for i in range(3):
            _record(
                s,
                "mlp",
                f"coin/{i}",
                status="failed",
                error=f"ValueError: bad {i}",
                traceback=f"Traceback (most recent call last):\nValueError: bad {i}",
            )
        _record(s, "mlp", "coin/3", status="failed", error="timed out after 5 s")  # no trace
    out = tmp_path / "failed.html"
    assert main(["report", "--results", str(db), "--out", str(out)]) == 0
    assert f"report: {out.resolve()}" in capsys.readouterr().out
    text = out.read_text()
    page = _Page(text)
    assert len(page.rows("failures")) == 4 and "<script" not in text
    assert "Failed jobs (4)" in page.headings
    assert 'data-empty="rankings"' in text and "No job finished" in text
    assert text.count("<details>") == 3 and "ValueError: bad 2" in text
    assert not any(name.startswith(("kl-", "nll-")) for name in page.tables)
    # the leaderboard itself still has nothing to rank: one line, status 2, with the way on
    assert main(["leaderboard", "--results", str(db)]) == 2
    assert "--failures" in capsys.readouterr().err


# ------------------------------------------------------------------ headless Chromium


def _chromium() -> str | None:
    return next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )


def _run_chromium(path, *extra: str, size=(1280, 900)) -> subprocess.CompletedProcess:
    args = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        "--hide-scrollbars",
        f"--window-size={size[0]},{size[1]}",
        "--virtual-time-budget=5000",
        *extra,
        path.resolve().as_uri(),
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def _console(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


def _probe(proc) -> dict:
    assert _console(proc) == []
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _check_layout(probe: dict, width: int) -> None:
    assert probe["width"] == width
    assert probe["scrollWidth"] <= width, "the page scrolls sideways"
    assert probe["overlaps"] == [], probe["overlaps"][:5]
    assert probe["outside"] == [], probe["outside"]
    assert probe["headers"] > 50 and probe["unexplained"] == []
    assert all(0 < w <= width for w in probe["shown"].values()), probe["shown"]


@pytest.mark.slow  # a browser process (11 s); CI installs Chromium and runs it
@pytest.mark.skipif(
    _chromium() is None,
    reason="Chromium not installed here (CI installs it: apt-get install -y chromium)",
)
def test_report_in_headless_chromium(report, tmp_path):
    # The check can fail: a page with a console error and an exception is caught.
    control = tmp_path / "control.html"
    control.write_text("<html><body><script>console.error('x'); nope();</script></body></html>")
    assert len(_console(_run_chromium(control, "--dump-dom"))) == 2
    # ... and so is a layout that overlaps or runs off a narrow page.
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<html><body><div style="width:900px">wide</div><table><tr><th>header</th>'
        '<td style="position:relative;left:-20px">value</td></tr></table>' + PROBE
    )
    bad_host = tmp_path / "bad-host.html"
    bad_host.write_text(HOST.format(src=bad.name, width=400, height=900))
    probe = _probe(_run_chromium(bad_host, "--dump-dom", size=(500, 900)))
    assert probe["scrollWidth"] > probe["width"] and probe["overlaps"] and probe["outside"]
    assert probe["unexplained"] == ["header"]

    assert _console(_run_chromium(report, "--dump-dom")) == []  # no console output (no scripts)

    probed = tmp_path / "probed.html"
    probed.write_text(report.read_text().replace("</body>", PROBE))
    desktop = _probe(_run_chromium(probed, "--dump-dom", size=(1280, 900)))
    _check_layout(desktop, 1280)
    host = tmp_path / "narrow.html"
    host.write_text(HOST.format(src=probed.name, width=400, height=900))
    narrow = _probe(_run_chromium(host, "--dump-dom", size=(500, 900)))
    _check_layout(narrow, 400)

    for probe in (desktop, narrow):
        assert probe["external"] == 0  # the escaped <img src=x> never became an element
        assert set(probe["plots"]) == PLOTS and all(w > 100 for w in probe["plots"].values())
        assert TABLES <= set(probe["tables"])
        assert probe["tables"]["kl-tau-1"] == 2 and probe["tables"]["failures"] == 1
        assert probe["tables"]["c2st"] == 4  # 2 tasks x 2 budgets for npe
        assert EVIL in probe["text"]  # shown as text, verbatim

    # Screenshots for a person to look at (kept in the test's temporary folder).
    shot = tmp_path / "report-desktop.png"
    _run_chromium(report, f"--screenshot={shot}", size=(1280, 2400))
    assert _png_size(shot) == (1280, 2400)
    screen = tmp_path / "narrow-screen.html"
    screen.write_text(HOST.format(src=report.name, width=400, height=2400))
    shutil.copy(report, tmp_path / report.name)
    shot = tmp_path / "report-narrow.png"
    _run_chromium(screen, f"--screenshot={shot}", size=(500, 2400))
    assert _png_size(shot) == (500, 2400)


def test_one_colour_per_agent_in_every_figure_of_a_report():
    """The user's agent was orange in the bar chart and light blue in the KL-against-
    num_train plot: within a report each agent has one colour whatever a figure shows (its
    runs and ours of it alike), lines and bars take it, and our shipped bars are hatched."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import pandas as pd

    from leaderboard.ranking.plots import colour_of, line_styles, one_colour_per_agent
    from leaderboard.ranking.rule_neural_testbed import plot_by_agent
    from leaderboard.ranking.standings import Ranking
    from testbed.ranking import JOINT_KL

    labels = ["mine", "ensemble+ (ours, shipped)", "mlp (ours, shipped)", "mlp"]
    with one_colour_per_agent(labels):
        colours = {label: colour_of(label, 0, 1) for label in labels}
        assert colours["mlp"] == colours["mlp (ours, shipped)"] != colours["mine"]
        # a figure with fewer agents, in another order, draws each in the same colour
        assert line_styles(["mlp", "mine"])["mine"]["color"] == colours["mine"]
        shown = ["mine", "ensemble+ (ours, shipped)"]
        table = pd.DataFrame(
            {"label": shown, "normalized_kl": [0.3, 0.2], "normalized_stderr": [0.01, 0.02]}
        )
        table.attrs["normalizer"] = "uniform"
        fig = plot_by_agent([Ranking(JOINT_KL, "classification_2d", 10, table)])
        bars = fig.axes[0].patches[:2]  # drawn bottom up: the table reversed
        by_label = dict(zip(reversed(table["label"]), bars))
        assert by_label["mine"].get_facecolor() == matplotlib.colors.to_rgba(colours["mine"])
        assert by_label["mine"].get_hatch() is None
        assert by_label["ensemble+ (ours, shipped)"].get_hatch() == "//"
