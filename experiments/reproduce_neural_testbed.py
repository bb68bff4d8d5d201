"""Reproduce the Neural Testbed's 2021 agents figure here, beside its published bars.

Runs the figure's seven agents on the 420 problems of `classification_2d_2021` (the
sweep and estimators behind the figure) through the leaderboard (a results store:
interrupted runs resume), then writes into --out

- `table.md` / `table.csv`: per agent and tau (1, 100), the mean KL normalised by `mlp`'s
  (mlp = 1, as the figure), its standard error over the problems' seed % 10 groups (as
  the reference's code grouped them), and the published value and error bar;
- `normalized_kl.png`: the figure, ours beside the published bars.

The agents run at the defaults of the reference's code of the figure's time (each agent's
best config of its sweep, `FIGURE_2021`: where they differ from today's defaults), or at
today's defaults (`--agent-configs current`), or at the configs that
`experiments.tune_references` chose on today's sweep and ships (`--agent-configs tuned`;
`--tuned bbb` takes only bbb's, the rest as `--agent-configs` says, so that mlp, the
normaliser, stays as the figure's).
`--select` instead runs each agent's whole sweep on the problems of one seed group, keeps
its config with the lowest mean KL (both taus), and reports that config on the other
groups.

Jobs whose runs the package ships (`leaderboard.published("neural_testbed")`) are taken
from it, not computed (`--no-shipped` computes them): `--report` tables the shipped runs
at once, and a run resumes where they end.

Run:
    python -m experiments.reproduce_neural_testbed --workers 2
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from testbed.errors import InputError

SWEEP = "classification_2d_2021"
OUTPUTS = ("table.md", "table.csv", "normalized_kl.png")
# the figure's agents (its order) at the reference's defaults of October 2021, where those
# differ from ours (which follow today's reference): see docs/reproductions/neural_testbed.md
FIGURE_2021: dict[str, dict] = {
    "mlp": {},
    "ensemble": {},
    "dropout": {"hidden_sizes": [50, 50]},
    "bbb": {"sigma_1": 0.3, "num_batches": 10_000},
    "hypermodel": {"index_dim": 5, "num_index_samples": 128, "enn_2021": True},
    "ensemble+": {},
    "sgmcmc": {"temperature_scaling": "linear"},
}
AGENT_CONFIGS = ("2021", "current", "tuned")
TUNED = "tuned_references"  # tune_references.SHIPPED (which imports this module)
RUN_ORDER = ("mlp", "ensemble", "ensemble+", "dropout", "bbb", "hypermodel", "sgmcmc")
TAUS = (1, 100)
DEFAULT_TAUS = ",".join(map(str, TAUS))
NORMALISER = "mlp"
TABLE_COLUMNS = [
    "agent", "tau", "problems", "mean_kl", "normalized_kl", "stderr",
    "published", "published_low", "published_high", "rank", "published_rank",
]  # fmt: skip


def published_figure() -> pd.DataFrame:
    """The figure's bars (agent, tau, normalized_kl, err_low, err_high), read from its pixels."""
    from leaderboard.ranking import literature

    return literature.published("neural_testbed_2021")


def tuned_configs() -> dict[str, dict]:
    """Each agent's config chosen by `experiments.tune_references` (on seed group 0 of
    today's `classification_2d`), as our shipped tuned runs hold it."""
    from leaderboard.shipped_files import shipped

    rows = shipped(TUNED).drop_duplicates("agent")
    return {a: json.loads(c) for a, c in zip(rows["agent"], rows["config"]) if a in FIGURE_2021}


def configs(agent_configs: str) -> dict[str, dict]:
    """Each figure agent's overrides of today's default config: the 2021 defaults, today's
    (`current`), or the tuned configs (`tuned`: the agents tuned so far)."""
    if agent_configs not in AGENT_CONFIGS:
        raise InputError(
            f"--agent-configs: got {agent_configs!r}; allowed: {', '.join(AGENT_CONFIGS)}"
        )
    if agent_configs == "tuned":
        return tuned_configs()
    return {a: (dict(FIGURE_2021[a]) if agent_configs == "2021" else {}) for a in FIGURE_2021}


def group_of(problem_id: str) -> int:
    """The problem's error-bar group, as the reference's code formed them: seed % 10."""
    import generative

    return int(generative.problem_settings(problem_id)["seed"]) % 10


def by_seed_group(problem_ids) -> dict[int, list[str]]:
    """The problems of each error-bar group, in the sweep's order."""
    groups: dict[int, list[str]] = {}
    for p in problem_ids:
        groups.setdefault(group_of(p), []).append(p)
    return dict(sorted(groups.items()))


def jobs_for(agent_names: Sequence[str], overrides: dict[str, dict], problem_ids) -> list:
    """The leaderboard jobs: each agent's (overridden) default config on every problem, one
    seed group after another (every agent on group 0, then on group 1, ...), so that a run
    stopped part-way holds whole groups that every agent finished."""
    from leaderboard.execution.sweeping import plan

    jobs = []
    for ids in by_seed_group(problem_ids).values():
        for name in agent_names:
            jobs += plan([name], ids, overrides=overrides.get(name))
    return jobs


def finished_groups(jobs: Sequence, stored: set[str]) -> list[int]:
    """The seed groups whose every job is stored: a partial run's table uses these only."""
    missing = {group_of(j.problem_id) for j in jobs if j.key not in stored}
    return sorted({group_of(j.problem_id) for j in jobs} - missing)


def kl_values(df: pd.DataFrame) -> pd.Series:
    """KL as the reference's leaderboard cleaned it: negative -> 0, non-finite or failed ->
    its fill value (1e6), so such a problem counts as infinitely wrong."""
    kl = pd.to_numeric(df["kl_estimate"], errors="coerce")
    finite = np.isfinite(kl) & (df["status"] == "ok")
    if "pct_finite_kl" in df:
        finite &= pd.to_numeric(df["pct_finite_kl"], errors="coerce").fillna(1) >= 1
    return kl.clip(lower=0).where(finite, 1e6)


def summary_table(results: str | Path, keys: set[str] | None = None) -> pd.DataFrame:
    """Ours normalised by mlp beside the published figure, per agent and tau."""
    import leaderboard.execution.results
    from leaderboard.ranking.scoring_neural_testbed import seed_group_stderr
    from leaderboard.rows import rows_to_summarise

    df = leaderboard.execution.results.load(results)
    df = df[df["problem_id"].str.startswith(SWEEP + "/")].copy()
    df = rows_to_summarise(df, results, keys, f"{SWEEP} runs to summarise")
    df["kl"] = kl_values(df)
    published = published_figure().set_index(["agent", "tau"])
    rows = []
    for tau in TAUS:
        at = df[df["tau"].astype(int) == tau]
        base = at[at["agent"] == NORMALISER]["kl"]
        scale = float(base.mean()) if len(base) else float("nan")
        for agent, g in at.groupby("agent"):
            # as the reference's leaderboard: np.std (ddof 0) of the seed groups' means
            stderr = seed_group_stderr(g["kl"] / scale, g["seed"])
            pub = published.loc[(agent, tau)] if (agent, tau) in published.index else None
            rows.append(
                dict(
                    agent=agent,
                    tau=tau,
                    problems=len(g),
                    mean_kl=float(g["kl"].mean()),
                    normalized_kl=float(g["kl"].mean()) / scale,
                    stderr=stderr,
                    published=np.nan if pub is None else float(pub["normalized_kl"]),
                    published_low=np.nan if pub is None else float(pub["err_low"]),
                    published_high=np.nan if pub is None else float(pub["err_high"]),
                )
            )
    order = {a: i for i, a in enumerate(FIGURE_2021)}
    out = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    out["rank"], out["published_rank"] = ranks(out, "normalized_kl"), ranks(out, "published")
    out["_o"] = out["agent"].map(lambda a: order.get(a, len(order)))
    return out.sort_values(["tau", "_o", "agent"]).drop(columns="_o").reset_index(drop=True)


def ranks(table: pd.DataFrame, column: str) -> pd.Series:
    """Each agent's place at its tau by `column` (1 = lowest KL; ties share the better
    place), among the table's agents that have a value: an ordering that differs from
    the figure's shows as differing ranks."""
    return table.groupby("tau")[column].rank(method="min").astype("Int64")


def against_2021(results: str, tuned_jobs: Sequence, base_jobs: Sequence,
                 within: Sequence[int] | None = None) -> pd.DataFrame:  # fmt: skip
    """Per agent of `tuned_jobs` and tau: its 2021 config's KL and the tuned one's minus it,
    both over the 2021 mlp's (`base_jobs`: those two configs' jobs), on the seed groups
    (of `within`, the table's, when given) where all three are stored; the difference's
    standard error is across those groups (paired: the same problems for both configs)."""
    import generative
    import leaderboard.execution.results

    df = leaderboard.execution.results.load(results)
    kl = kl_values(df).set_axis(df["key"])
    tau_of = {j.problem_id: generative.problem_settings(j.problem_id)["tau"] for j in base_jobs}
    rows = []
    for tau in TAUS:
        for agent in dict.fromkeys(j.agent for j in tuned_jobs):
            t, d, m = ([j for j in jobs if j.agent == a and tau_of.get(j.problem_id) == tau]
                       for jobs, a in ((tuned_jobs, agent), (base_jobs, agent),
                                       (base_jobs, NORMALISER)))  # fmt: skip
            groups = finished_groups(t + d + m, set(kl.index))
            groups = [g for g in groups if within is None or g in within]
            if not groups:
                continue

            def means(jobs: list, groups: list[int] = groups) -> np.ndarray:  # per group
                return np.array([kl[[j.key for j in jobs if group_of(j.problem_id) == g]].mean()
                                 for g in groups])  # fmt: skip

            scale = float(np.mean(kl[[j.key for j in m if group_of(j.problem_id) in groups]]))
            gap = (means(t) - means(d)) / scale
            se = gap.std(ddof=1) / np.sqrt(len(gap)) if len(gap) > 1 else np.nan
            rows.append({"agent": agent, "tau": tau, "kl_2021": float(means(d).mean()) / scale,
                         "kl_tuned": float(means(t).mean()) / scale,
                         "difference": float(gap.mean()), "difference_se": float(se)})
    return pd.DataFrame(rows, columns=["agent", "tau", "kl_2021", "kl_tuned", "difference",
                                       "difference_se"])  # fmt: skip


def markdown(table: pd.DataFrame) -> str:
    """The summary as a markdown table; a tuned agent is marked, and beside it its 2021
    config and the paired difference when the table has them (`against_2021`)."""
    paired = "difference" in table and table["difference"].notna().any()
    head = ["agent", "tau", "problems", "KL / mlp's (ours)", "+- s.e.", "published", "bar",
            "rank (ours, published)"]  # fmt: skip
    beside = ["2021 config / 2021 mlp", "tuned / 2021 mlp", "tuned - 2021 (paired)"]
    head += beside if paired else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table.itertuples(index=False):
        bar = f"{r.published_low:.3f}-{r.published_high:.3f}" if np.isfinite(r.published) else ""
        tuned = getattr(r, "config", "") == "tuned"
        cells = [
            f"{r.agent} (tuned)" if tuned else r.agent, str(r.tau), str(r.problems),
            f"{r.normalized_kl:.3f}", f"{r.stderr:.3f}" if np.isfinite(r.stderr) else "",
            f"{r.published:.3f}" if np.isfinite(r.published) else "", bar,
            ", ".join("-" if pd.isna(v) else str(v) for v in (r.rank, r.published_rank)),
        ]  # fmt: skip
        if paired:
            known = np.isfinite(r.difference)
            cells += [f"{r.kl_2021:.3f}", f"{r.kl_tuned:.3f}",
                      f"{r.difference:+.3f} +- {r.difference_se:.3f}"] if known else [""] * 3
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(table: pd.DataFrame, path: Path, groups: Sequence[int] = ()) -> None:
    """Bars per agent at each tau the table holds: ours (solid, +- s.e.) beside the
    published (hatched); titled with the seed groups and problems they cover."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    taus = [tau for tau in TAUS if (table["tau"] == tau).any()] or list(TAUS)  # empty: axes
    fig, axes = plt.subplots(1, len(taus), figsize=(5 * len(taus), 3.4), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, tau in zip(axes, taus):
        t = table[table["tau"] == tau].reset_index(drop=True)
        x = np.arange(len(t))
        ax.bar(x - 0.2, t["normalized_kl"], 0.4, yerr=t["stderr"], capsize=2, label="ours")
        pub = t["published"]
        err = np.vstack([pub - t["published_low"], t["published_high"] - pub])
        ax.bar(
            x + 0.2, pub, 0.4, yerr=err, capsize=2, color="#bbb", hatch="//",
            label="published (2021)",
        )  # fmt: skip
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(x, t["agent"], rotation=30)
        problems = int(t["problems"].max()) if len(t) else 0
        ax.set_title(f"tau = {tau} ({problems} problems)")
    axes[0].set_ylabel("KL / mlp's KL")
    axes[-1].legend(fontsize=8, frameon=False)
    if groups:
        fig.suptitle(f"{SWEEP}, seed groups {', '.join(map(str, groups))}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)


def select_configs(results, executor, agent_names, group: int, problem_ids) -> dict[str, dict]:
    """Each agent's config of its sweep with the lowest mean KL on the problems of seed
    group `group` (all taus), run through the store."""
    import leaderboard.execution.results
    from leaderboard.execution.sweeping import plan, run

    chosen = [p for p in problem_ids if group_of(p) == group]
    jobs = plan(agent_names, chosen, configs="sweep")
    run(jobs, results, executor)

    df = leaderboard.execution.results.load(results)
    df = df[df["key"].isin({j.key for j in jobs})].copy()
    df["kl"] = kl_values(df)
    best = df.groupby(["agent", "config_key"]).agg(kl=("kl", "mean"), config=("config", "first"))
    out = {}
    for agent, g in best.reset_index().groupby("agent"):
        config = g.sort_values("kl").iloc[0]["config"]
        out[agent] = json.loads(config) if isinstance(config, str) else dict(config)
    return out


def listed(text: str | None) -> list[str]:
    """The names of a comma-separated option, blanks left out."""
    return [a.strip() for a in (text or "").split(",") if a.strip()]


def tuned_agents(args, names: Sequence[str]) -> list[str]:
    """The agents of `names` that run at their tuned configs (`--agent-configs tuned`, or
    those of `--tuned`, which `_checked` holds to `names`): the ones `--ship` ships."""
    return list(names) if args.agent_configs == "tuned" else listed(args.tuned)


def ship(jobs: Sequence, agents: Sequence[str], results: str, path: Path) -> str:
    """The finished runs of `agents`' jobs (at their tuned configs) in `results`, merged
    into our shipped tuned runs at `path` (`tuned_runs.write_tuned`, by agent and
    sweep): a partial run ships what finished, and a run on another machine takes it."""
    from experiments.tuned_runs import write_tuned
    from leaderboard.execution.shipped_store import from_results

    keys = {j.key for j in jobs if j.agent in set(agents)}
    return write_tuned(from_results(results, keys), results, path)


def _parser():
    from experiments.console import script_parser

    parser = script_parser("reproduce_neural_testbed", __doc__.splitlines()[0])
    parser.add_argument("--agents", default=",".join(RUN_ORDER),
                        help="the figure's agents to run (a list that has mlp, the normaliser)")
    parser.add_argument("--agent-configs", default="2021",
                        help="2021 or current defaults, or tuned (tune_references' choice)")
    parser.add_argument("--results", default="neural-testbed-reproduction.db",
                        help="results store (resumable)")
    parser.add_argument("--out", default="neural-testbed-reproduction",
                        help="folder for the table and figure")
    parser.add_argument("--workers", type=int, default=0, help="parallel jobs (0: one per core)")
    parser.add_argument("--tuned", default=None, metavar="AGENTS",
                        help="these agents at tune_references' choice, the rest as "
                        "--agent-configs (e.g. --tuned bbb: mlp stays the normaliser)")
    parser.add_argument(
        "--select", type=int, default=None, metavar="GROUP",
        help="pick each agent's best sweep config on seed group GROUP (0-9), report the rest",
    )  # fmt: skip
    parser.add_argument(
        "--problems", default=None, help="only these problem ids (a,b,...; a trial run)"
    )
    parser.add_argument("--taus", default=DEFAULT_TAUS, help="only the problems of these taus")
    parser.add_argument(
        "--report", action="store_true",
        help="run nothing: the table and figure of the seed groups every agent has finished",
    )  # fmt: skip
    parser.add_argument(
        "--no-shipped", action="store_true",
        help="compute every job, also those whose runs the package ships",
    )  # fmt: skip
    parser.add_argument(
        "--ship", default=None, metavar="CSV.GZ",
        help="merge the tuned agents' finished runs into ours (tuned_references.csv.gz)",
    )  # fmt: skip
    return parser


def _checked(args) -> tuple[list[str], dict[str, dict], list[str], Path]:
    """The agents, their configs' overrides and the problem ids asked for, and the --out
    folder, each checked (and the outputs' paths) before any job runs."""
    import generative
    from experiments.console import check_range, split_choices, split_items
    from leaderboard.outputs import check_output_folder, check_output_path

    check_range("--workers", args.workers, 0, 64)
    names = split_choices(args.agents, "--agents", list(FIGURE_2021))
    if NORMALISER not in names:
        raise InputError(f"--agents: got {args.agents!r}; allowed: a list that has mlp")
    overrides = configs(args.agent_configs)
    untuned = [a for a in names if a not in overrides]
    if untuned:
        raise InputError(
            f"--agents: {', '.join(untuned)} not tuned yet (experiments.tune_references "
            f"--ship); allowed with --agent-configs tuned: some of {', '.join(overrides)}"
        )
    if args.tuned is not None and args.select is not None:
        raise InputError("--tuned: not with --select (which chooses every agent's config); "
                         "allowed: one of the two")  # fmt: skip
    if args.tuned is not None:  # agents of --agents that are tuned, each once
        chosen = tuned_configs()
        allowed = [a for a in chosen if a in names]
        outside = [a for a in listed(args.tuned) if a in chosen and a not in names]
        if outside:  # a tuned agent, but not run: its did-you-mean would mislead
            raise InputError(f"--tuned: got {args.tuned!r}, which names {outside[0]}, an agent "
                             f"--agents leaves out; allowed: agents of --agents "
                             f"({', '.join(allowed) or 'none of them is tuned'})")  # fmt: skip
        tuned_ones = split_choices(args.tuned, "--tuned", allowed)
        overrides |= {a: chosen[a] for a in tuned_ones}
    ids = generative.sweep_ids(SWEEP)
    taus = split_choices(args.taus, "--taus", TAUS, cast=int)
    ids = [i for i in ids if generative.problem_settings(i)["tau"] in taus]
    if args.problems is not None:  # given, even empty (which split_items refuses)
        given = split_items(args.problems, "--problems", what=f"problem ids of {SWEEP}")
        bad = [p for p in given if p not in ids]
        if bad:
            raise InputError(f"--problems: got {bad[0]!r}; allowed: ids of {SWEEP}"
                             f"{' at tau ' + args.taus if args.taus != DEFAULT_TAUS else ''}")
        ids = given
    if args.select is not None and not 0 <= args.select <= 9:
        raise InputError(f"--select: got {args.select}; allowed: a seed group 0-9")
    if args.select is not None and args.report:
        raise InputError("--report: runs nothing; allowed: without --select (which runs)")
    if args.ship:
        if not tuned_agents(args, names) or args.select is not None:
            raise InputError("--ship: ships tuned agents' runs; allowed with --agent-configs "
                             "tuned or --tuned AGENTS (not --select)")  # fmt: skip
        check_output_path("--ship", Path(args.ship), [args.results], suffixes=(".csv.gz",))
        if args.report and not Path(args.results).exists():
            raise InputError(f"--ship: --results {args.results!r} does not exist; allowed: "
                             "a store this reproduction ran into")  # fmt: skip
    out = check_output_folder("--out", args.out, OUTPUTS, [args.results])  # before any job
    return names, overrides, ids, out


def _store_to_read(args, stack: contextlib.ExitStack) -> str:
    """The results store: --results, or for a --report without one a temporary store for
    the package's shipped runs (none is made then)."""
    if not (args.report and not Path(args.results).exists()):
        return args.results
    if args.no_shipped:
        raise InputError(
            f"--results: got {args.results!r}, which does not exist; allowed: this "
            "reproduction's results store (or, without --no-shipped, none: the "
            "package's shipped runs)"
        )
    return str(Path(stack.enter_context(tempfile.TemporaryDirectory())) / "r.db")


def _reported(jobs: Sequence, results: str, shipped_only: bool) -> tuple[set[str], list[int]]:
    """`--report`: the keys of the seed groups every agent finished, and those groups; a
    tau none of whose groups is finished is said (the table leaves it out)."""
    import generative
    from experiments.console import stored_keys

    stored = stored_keys(results) if Path(results).exists() else set()  # none shipped
    groups = finished_groups(jobs, stored)
    each = {a: finished_groups([j for j in jobs if j.agent == a], stored)
            for a in dict.fromkeys(j.agent for j in jobs)}  # fmt: skip
    said = "; ".join(f"{a}: {', '.join(map(str, g)) or 'none'}" for a, g in each.items())
    if not groups:
        held = "the package's shipped runs hold" if shipped_only else f"{results!r} has"
        raise InputError(
            f"--results: {held} no seed group that every agent finished (finished groups: "
            f"{said}); allowed: a results store of this reproduction that does (a run "
            "without --report computes the rest)"
        )
    print(f"seed groups every agent finished: {groups}", file=sys.stderr)
    tau = {p: generative.problem_settings(p)["tau"] for p in {j.problem_id for j in jobs}}
    for left in sorted(set(tau.values()) - {tau[p] for p in tau if group_of(p) in groups}):
        print(f"not tabled: tau = {left}, no seed group of it that every agent finished "
              f"({said}); --taus chooses", file=sys.stderr)  # fmt: skip
    return {j.key for j in jobs if group_of(j.problem_id) in groups}, groups


def _table(
    args, stack: contextlib.ExitStack
) -> tuple[pd.DataFrame, Path, list[int], bool, InputError | None]:
    """Runs (or, with --report, reads) the reproduction: its table, the --out folder, the
    seed groups it covers, whether a job failed, and --ship's refusal (after a run: the
    table is written all the same)."""
    from experiments.console import run_jobs
    from experiments.reproduction import take_shipped
    from leaderboard.execution.sweeping import make_executor

    names, overrides, ids, out = _checked(args)
    executor = make_executor("local", workers=args.workers)
    if args.select is not None:
        overrides = select_configs(args.results, executor, names, args.select, ids)
        ids = [i for i in ids if group_of(i) != args.select]
    jobs = jobs_for(names, overrides, ids)
    tuned = tuned_agents(args, names) if args.select is None else []
    with_2021 = list(dict.fromkeys([NORMALISER, *tuned])) if tuned else []
    base = jobs_for(with_2021, configs("2021"), ids)
    results = _store_to_read(args, stack)
    if not args.no_shipped:  # the 2021 configs' runs too, beside the tuned ones
        take_shipped(jobs + base, results)  # (it counts a job listed twice once)
    failed = False if args.report else run_jobs(jobs, results, executor).any_failed
    refusal = None
    if args.ship:  # what finished, a partial run's too: its table uses whole groups
        try:
            print(ship(jobs, tuned_agents(args, names), results, Path(args.ship)),
                  file=sys.stderr)  # fmt: skip
        except InputError as e:  # e.g. every tuned job failed: the store keeps them
            refusal = e
    if args.report:
        keys, groups = _reported(jobs, results, results != args.results)
    else:
        keys, groups = {j.key for j in jobs}, sorted({group_of(j.problem_id) for j in jobs})
    table = summary_table(results, keys)
    table["config"] = [("tuned" if a in tuned else "selected" if args.select is not None
                        else args.agent_configs) for a in table["agent"]]  # fmt: skip
    if tuned:  # beside each tuned agent: its 2021 config, and the paired difference
        paired = against_2021(results, [j for j in jobs if j.agent in tuned], base, groups)
        table = table.merge(paired, on=["agent", "tau"], how="left")
    return table, out, groups, failed, refusal


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.console import bad_input, setup_logging, shown
    from leaderboard.execution.worker import enable_compilation_cache
    from leaderboard.outputs import write_atomically

    args = _parser().parse_args(argv)
    setup_logging()
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    enable_compilation_cache()
    try:
        with contextlib.ExitStack() as stack:  # a --report's temporary store, when it makes one
            table, out, groups, failed, refusal = _table(args, stack)
    except InputError as e:
        return bad_input("reproduce_neural_testbed", e)
    text = markdown(table)
    csv = io.StringIO()
    table.to_csv(csv, index=False, float_format="%.4f")
    write_atomically(
        "--out", out / OUTPUTS[0], lambda tmp: tmp.write_text(text + "\n"), make_folder=True
    )
    write_atomically("--out", out / OUTPUTS[1], lambda tmp: tmp.write_text(csv.getvalue()))
    write_atomically("--out", out / OUTPUTS[2], lambda tmp: figure(table, tmp, groups))
    status = shown(text, out, failed)
    return bad_input("reproduce_neural_testbed", refusal) if refusal else status


if __name__ == "__main__":
    from experiments.console import interruptible

    sys.exit(interruptible("reproduce_neural_testbed", main, ends_process=True))
