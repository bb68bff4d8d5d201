"""Reproduce the SBI benchmark (Lueckmann et al. 2021) here, beside its published results.

Runs the benchmark's algorithms at their default (the paper's) settings on the tasks,
budgets and published observations asked for, through the leaderboard (a results store:
interrupted runs resume; amortized agents train once per task and budget), then writes

- `table.md`: per task x budget x agent, our mean C2ST over the observations, the paper's
  mean and range over the same observations, whether ours lies in that range, the seconds a
  run took here (training + 10,000 posterior draws, as the paper timed it; a shared
  training counted once) and of those the sampling's, beside the paper's minutes a run (it
  trained per observation);
- `c2st_vs_budget.png`: C2ST against the simulation budget per task, ours (solid) and the
  paper's (dashed), as the paper's figure 2; the paper's neural methods (npe, nle, nre)
  are drawn beside a run of sbi's newer methods only (`--paper-agents`).

sbi 0.27's newer methods run the same way (`fmpe`, `npse`, `nre_c`, `bnre` and the
sequential `snre_c`, `sbnre`): the paper has no results for them, so their rows have none.
`--ship PATH` writes this run's finished runs as our shipped results
(`leaderboard/data/sbibm_ours.csv`, read by `leaderboard.ranking.shipped`), shown beside a
user's own runs by `testbed leaderboard`. `--report` runs nothing: the table and figure of
the cells (task x budget x agent) whose every observation the results store holds, while
the run that fills it goes on.

Run:
    python -m experiments.reproduce_sbibm --tasks two_moons,gaussian_linear,slcp \\
        --budgets 1000,10000 --agents npe,nle,nre,rej_abc,smc_abc
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from testbed.errors import InputError

OUTPUTS = ("table.md", "c2st_vs_budget.png")  # written into --out
PAPER_AGENTS = ("npe", "snpe", "nle", "snle", "nre", "snre", "rej_abc", "smc_abc")
NEW_AGENTS = ("fmpe", "npse", "nre_c", "snre_c", "bnre", "sbnre")  # sbi 0.27's newer methods
SBIBM_AGENTS = PAPER_AGENTS + NEW_AGENTS
PAPER_BESIDE_NEW = ("npe", "nle", "nre")  # the paper's curves beside a run of new methods
TABLE_COLUMNS = [
    "task",
    "budget",
    "agent",
    "runs",
    "mean_c2st",
    "paper_c2st",
    "paper_min",
    "paper_max",
    "within_paper_range",
    "seconds_per_run",
    "sampling_seconds_per_run",
    "paper_minutes_per_run",
]


def agent_overrides(pairs: Sequence[str]) -> dict[str, dict[str, str]]:
    """`agent.field=value` pairs -> {agent: {field: value}}."""
    out: dict[str, dict[str, str]] = {}
    for pair in pairs:
        name, _, rest = pair.partition(".")
        field, eq, value = rest.partition("=")
        if not (name and field and eq):
            raise InputError(f"--set: got {pair!r}; allowed: agent.field=value")
        out.setdefault(name.strip(), {})[field.strip()] = value.strip()
    return out


def jobs_for(tasks, budgets, agent_names, observations, overrides) -> list:
    """The leaderboard jobs: each agent's default config on every sbi/<task>/<budget>/<k>."""
    from leaderboard.execution.sweeping import plan

    for name in overrides:
        if name not in agent_names:
            raise InputError(
                f"--set: got a change for agent {name!r}, which this run does not have; "
                f"allowed: one of the agents run: {', '.join(agent_names)}"
            )

    ids = [f"sbi/{t}/{b}/{k}" for t in tasks for b in budgets for k in observations]
    jobs = []
    for name in agent_names:
        jobs += plan([name], ids, overrides=overrides.get(name))
    return jobs


def cell_of(job) -> tuple[str, str, str]:
    """(task, budget, agent) of a job on sbi/<task>/<budget>/<k>."""
    _, task, budget, _ = job.problem_id.split("/", 3)
    return task, budget, job.agent


def finished_cells(jobs: Sequence, stored: set[str]) -> list[tuple[str, str, str]]:
    """The cells whose every job is stored: a partial run's table uses these only."""
    missing = {cell_of(j) for j in jobs if j.key not in stored}
    return sorted({cell_of(j) for j in jobs} - missing)


def summary_table(results: str | Path, keys: set[str] | None = None) -> pd.DataFrame:
    """Ours beside the paper's, per task x budget x agent (see the module docstring), over
    the jobs `keys` (default: every sbi/... row; one config per agent, else refused). The
    paper's mean and range are over the observations we ran."""
    import leaderboard.execution.results
    from generative.sbi.problems import SBIBM
    from leaderboard.ranking import literature
    from leaderboard.rows import rows_to_summarise

    df = leaderboard.execution.results.load(results)
    df = df[(df["status"] == "ok") & df["problem_id"].str.startswith("sbi/")].copy()
    df = rows_to_summarise(
        df, results, keys, "finished sbi/... runs to compare", " (summarise one run's jobs)"
    )
    df = df[df["observation_source"] != "seeded"]  # ours have no published counterpart
    df = df.rename(columns={"num_simulations": "budget", "num_observation": "observation"})
    df = df.astype({"budget": int, "observation": int})
    # the algorithm's time, as the paper's: training + sampling (not our scoring); a shared
    # training's seconds are on its first run only, so the mean spreads them over its runs
    sampling = df.get("sampling_seconds", pd.Series(0.0, index=df.index)).astype(float)
    df["sampling"] = sampling.fillna(0.0)
    df["seconds"] = df["train_seconds"].astype(float) + df["sampling"]
    columns = {"runs": ("c2st", "size"), "mean_c2st": ("c2st", "mean"),
               "seconds_per_run": ("seconds", "mean"),
               "sampling_seconds_per_run": ("sampling", "mean")}  # fmt: skip
    ours = df.groupby(["task", "budget", "agent"]).agg(**columns).reset_index()
    out = ours.merge(literature.paper_cells(df, SBIBM), on=["task", "budget", "agent"], how="left")
    out["within_paper_range"] = (out["mean_c2st"] >= out["paper_min"]) & (
        out["mean_c2st"] <= out["paper_max"]
    )
    return out[TABLE_COLUMNS].sort_values(["task", "budget", "agent"]).reset_index(drop=True)


def markdown(table: pd.DataFrame) -> str:
    """The summary as a markdown table (C2ST to 3 decimals, times to 2-3 digits)."""
    head = [
        "task", "budget", "agent", "runs", "C2ST (ours)", "C2ST (paper)", "paper range",
        "in range", "s / run (ours)", "sampling s / run", "min / run (paper)",
    ]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table.itertuples(index=False):
        rng = f"{r.paper_min:.3f}-{r.paper_max:.3f}" if np.isfinite(r.paper_min) else ""
        paper = np.isfinite(r.paper_c2st)
        cells = [
            r.task, f"{r.budget:,}", r.agent, str(r.runs), f"{r.mean_c2st:.3f}",
            f"{r.paper_c2st:.3f}" if paper else "", rng,
            ("yes" if r.within_paper_range else "no") if paper else "",
            f"{r.seconds_per_run:.3g}", f"{r.sampling_seconds_per_run:.3g}",
            f"{r.paper_minutes_per_run:.2g}" if np.isfinite(r.paper_minutes_per_run) else "",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paper_only(table: pd.DataFrame, agents: Sequence[str], observations) -> pd.DataFrame:
    """Rows for the paper's `agents` that `table` lacks, at its tasks and budgets: the
    paper's mean and range over `observations`, no result of ours (mean_c2st NaN)."""
    from generative.sbi.problems import SBIBM
    from leaderboard.ranking import literature

    missing = [a for a in agents if a not in set(table["agent"])]
    if not missing or not len(table):
        return table.iloc[:0]
    cells = table[["task", "budget"]].drop_duplicates()
    observed = pd.DataFrame(
        [
            {"agent": a, "task": t, "budget": b, "observation": k}
            for a in missing
            for t, b in cells.itertuples(index=False)
            for k in observations
        ]
    )
    return literature.paper_cells(observed, SBIBM).assign(mean_c2st=np.nan)


def figure(table: pd.DataFrame, path: Path, paper: pd.DataFrame | None = None) -> None:
    """C2ST vs budget per task: ours solid with dots, the paper's dashed with its range
    (with `paper`: also the paper's curves of agents we did not run, `paper_only`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if paper is not None and len(paper):
        table = pd.concat([table, paper], ignore_index=True)
    tasks = sorted(table["task"].unique())
    colors = {a: f"C{i % 10}" for i, a in enumerate(sorted(table["agent"].unique()))}
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.8 * len(tasks) + 1.4, 3.2), squeeze=False)
    for ax, task in zip(axes.flat, tasks):
        cell = table[table["task"] == task]
        for agent, g in cell.groupby("agent", sort=True):
            g = g.sort_values("budget")
            color = colors[agent]
            ours = g.dropna(subset=["mean_c2st"])
            if len(ours):
                ax.plot(ours["budget"], ours["mean_c2st"], "o-", color=color, ms=4, label=agent)
            p = g.dropna(subset=["paper_c2st"])
            if len(p):
                err = np.vstack(
                    [p["paper_c2st"] - p["paper_min"], p["paper_max"] - p["paper_c2st"]]
                )
                ax.errorbar(
                    p["budget"], p["paper_c2st"], yerr=err, fmt="x--", color=color, alpha=0.5,
                    ms=4, capsize=2, label=None if len(ours) else f"{agent} (paper)",
                )  # fmt: skip
        ax.axhline(0.5, color="#999", lw=0.8, ls=":")
        ax.set(xscale="log", ylim=(0.45, 1.02), title=task, xlabel="simulations")
        ax.set_ylabel("C2ST")
    # one legend beside the panels, never over their lines
    handles, labels = axes.flat[0].get_legend_handles_labels()
    for ax in axes.flat[1:]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.tight_layout(rect=(0, 0, 1 - 1.4 / fig.get_figwidth(), 1))
    fig.legend(
        handles, labels, loc="center right", fontsize=7, title="ours (solid)\npaper (dashed)",
        title_fontsize=7, frameon=False,
    )  # fmt: skip
    fig.savefig(path, dpi=110, format="png")  # path may be a temporary name
    plt.close(fig)


def _reported_keys(jobs: Sequence, results: str) -> set[str]:
    """`--report`: the keys of the finished cells' jobs (the store read, never written)."""
    from experiments.console import stored_keys

    cells = set(finished_cells(jobs, stored_keys(results)))
    if not cells:
        raise InputError(
            f"--results: {results!r} has no cell (task, budget, agent) whose every "
            "observation is stored"
        )
    left = len({cell_of(j) for j in jobs} - cells)
    print(f"{len(cells)} cells finished, {left} not yet", file=sys.stderr)
    return {j.key for j in jobs if cell_of(j) in cells}


def _paper_agents(text: str, run: Sequence[str]) -> list[str]:
    """The paper's algorithms drawn though not run (`--paper-agents`)."""
    if text == "auto":
        return [] if set(run) & set(PAPER_AGENTS) else list(PAPER_BESIDE_NEW)
    if text == "none":
        return []
    from experiments.console import split_choices

    try:
        return split_choices(text, "--paper-agents", PAPER_AGENTS)
    except InputError as e:
        raise InputError(f"{e}; or none, or auto") from None


def _parser():
    from experiments.console import script_parser

    parser = script_parser("reproduce_sbibm", __doc__.splitlines()[0])
    parser.add_argument("--tasks", default="two_moons,gaussian_linear,slcp")
    parser.add_argument("--budgets", default="1000,10000")
    parser.add_argument("--agents", default="npe,nle,nre,rej_abc,smc_abc")
    parser.add_argument("--observations", default="1,2,3,4,5,6,7,8,9,10")
    parser.add_argument("--results", default="sbibm-reproduction.db", help="results store")
    parser.add_argument("--out", default="sbibm-reproduction", help="folder for table and figure")
    parser.add_argument("--workers", type=int, default=0, help="parallel jobs (0: one per core)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="AGENT.FIELD=VALUE",
        help="change an agent's default config (e.g. npe.max_num_epochs=20)",
    )  # fmt: skip
    parser.add_argument(
        "--paper-agents", default="auto",
        help="the paper's algorithms drawn (dashed) though not run: comma-separated, 'none',"
        " or 'auto' (npe,nle,nre when the run has none of the paper's algorithms)",
    )  # fmt: skip
    parser.add_argument(
        "--report", action="store_true",
        help="run nothing: the table and figure of the cells whose every observation the "
        "results store holds (a run in progress)",
    )  # fmt: skip
    parser.add_argument(
        "--ship", default=None, metavar="CSV",
        help="also write this run's finished runs as our shipped results (e.g. "
        "leaderboard/data/sbibm_ours.csv; see leaderboard.ranking.shipped)",
    )  # fmt: skip
    return parser


def _check_outputs(args) -> Path:
    """The --out folder; its files and --ship never land on an input (the results store,
    the paper's published runs) nor on each other, checked before any job runs."""
    from leaderboard.outputs import check_output_folder, check_output_path
    from leaderboard.ranking import literature

    published = list(literature.SOURCES.values())  # the paper's runs, read for the table
    # never the results store, its side files (any SQLite file's), nor in them; no folder
    out = check_output_folder("--out", args.out, OUTPUTS, [args.results], published)
    if args.ship:
        outputs = [out / name for name in OUTPUTS]
        check_output_path("--ship", args.ship, [args.results], [*published, *outputs])
    return out


def _ship(results: str, keys: set[str], path: str) -> None:
    """This run's finished runs written as our shipped results (`--ship`)."""
    from leaderboard.execution.shipped_store import from_results
    from leaderboard.outputs import write_atomically
    from leaderboard.ranking import shipped

    rows = from_results(results, keys)
    write_atomically("--ship", path, lambda tmp: shipped.write(rows, tmp), keep_suffix=True)
    print(f"{len(rows)} runs shipped -> {path}", file=sys.stderr)


def _run(args) -> tuple[pd.DataFrame, pd.DataFrame, Path, bool]:
    """Runs (or, with --report, reads) the reproduction: its table, the paper's curves
    drawn beside it, the --out folder, and whether a job failed."""
    import generative
    from experiments.console import run_jobs, split_choices
    from leaderboard.execution.sweeping import make_executor

    tasks = split_choices(args.tasks, "--tasks", generative.sbi.task_names())
    budgets = split_choices(args.budgets, "--budgets", (1_000, 10_000, 100_000), int)
    agent_names = split_choices(args.agents, "--agents", SBIBM_AGENTS)
    observations = split_choices(args.observations, "--observations", range(1, 11), int)
    paper_agents = _paper_agents(args.paper_agents, agent_names)
    out = _check_outputs(args)
    jobs = jobs_for(tasks, budgets, agent_names, observations, agent_overrides(args.set))
    executor = make_executor("local", workers=args.workers)  # refused before the store is made
    if args.report:
        failed, keys = False, _reported_keys(jobs, args.results)
    else:
        failed, keys = run_jobs(jobs, args.results, executor).any_failed, {j.key for j in jobs}
    table = summary_table(args.results, keys)
    if args.ship:
        _ship(args.results, keys, args.ship)
    return table, paper_only(table, paper_agents, observations), out, failed


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.console import bad_input, setup_logging, shown
    from leaderboard.execution.worker import enable_compilation_cache
    from leaderboard.outputs import write_atomically

    args = _parser().parse_args(argv)
    setup_logging()  # hours of work say what they are doing, as `testbed sweep` does
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    enable_compilation_cache()
    try:
        table, paper, out, failed = _run(args)
    except InputError as e:
        return bad_input("reproduce_sbibm", e)
    text = markdown(table)
    write_atomically(
        "--out", out / OUTPUTS[0], lambda tmp: tmp.write_text(text + "\n"), make_folder=True
    )
    write_atomically("--out", out / OUTPUTS[1], lambda tmp: figure(table, tmp, paper))
    return shown(text, out, failed)


if __name__ == "__main__":
    from experiments.console import interruptible

    sys.exit(interruptible("reproduce_sbibm", main, ends_process=True))
