"""Tuned reference agents, selected honestly: each agent's config is chosen on one seed group
of the testbed and scored on the nine others (the plan is in docs/performance.md).

The Neural Testbed's figure (and any fair leaderboard) shows each agent at its best
settings, but the reference chose them on the very problems it reported, which flatters
every agent. Here the selection sees only the problems of one seed group (seed % 10 =
`--group`, the reference's error-bar groups: 42 of `classification_2d`'s 420), and the
chosen config is then run on the held-out groups:

1. **Select.** Every config of the agent's registered sweep on the selection group. The
   sweeps that cost most (`HALVED`: dropout, sgmcmc, bbb) are halved first: every config
   on the group's T = 0.1 problems, then the best third on the rest of the group.
2. **Choose.** The config with the lowest score on the selection group: the mean over tau
   of its mean KL divided by `uniform`'s on the same problems (the testbed's normalised
   KL). `choose` reads the selection group's rows alone and refuses any other.
3. **Score.** The chosen config on the held-out groups, beside the default config there
   (the shipped runs) and beside its own score on the selection group (the reference's
   way, in-sample), so both numbers are reported.

Jobs run through the leaderboard's sweep into `--results` (resumable); the runs the package
ships (the defaults, `uniform`, the tunings it shipped) are recorded from it, not computed
(`--no-shipped` computes them all: a tuning that checks ours).

    python -m experiments.tune_references --agents mlp,ensemble+ --results tuned.db
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from testbed.errors import InputError

SWEEP = "classification_2d"
AGENTS = ("mlp", "ensemble", "ensemble+", "dropout", "hypermodel", "bbb", "sgmcmc", "epinet")
HALVED = ("dropout", "sgmcmc", "bbb")  # their sweeps cost most: halved before the full group
FIRST_ROUND_TEMPERATURE = 0.1  # the halving's first round: the group's problems at this T
KEEP = 1 / 3  # the share of configs a halving keeps for its second round
NORMALISER = "uniform"
SHIPPED = "tuned_references"  # the chosen configs on every problem, ranked beside the defaults


def seed_group(problem_id: str) -> int:
    """A problem's seed group (seed % 10), as the reference grouped its error bars."""
    import generative

    return int(generative.problem_settings(problem_id)["seed"]) % 10


def split(problem_ids: Sequence[str], group: int) -> tuple[list[str], list[str]]:
    """(the selection group's problems, the held-out ones), in the sweep's order."""
    selection = [p for p in problem_ids if seed_group(p) == group]
    return selection, [p for p in problem_ids if seed_group(p) != group]


def first_round(problem_ids: Sequence[str]) -> list[str]:
    """The halving's first round: the problems at FIRST_ROUND_TEMPERATURE (a third)."""
    import generative

    return [
        p for p in problem_ids
        if generative.problem_settings(p)["temperature"] == FIRST_ROUND_TEMPERATURE
    ]  # fmt: skip


def normalised(rows: pd.DataFrame, uniform: pd.DataFrame) -> pd.Series:
    """Per config (agent, config_key): the mean over tau of its mean KL divided by
    `uniform`'s mean KL on the same problems (a failed or non-finite KL counts 1e6, as the
    testbed's rule; negative KL counts 0)."""
    import generative
    from experiments.reproduce_neural_testbed import kl_values

    def tau_of(ids: pd.Series) -> pd.Series:
        return ids.map(lambda p: int(generative.problem_settings(p)["tau"]))

    rows = rows.assign(kl=kl_values(rows), tau=tau_of(rows["problem_id"]))
    base = uniform.assign(kl=kl_values(uniform)).set_index("problem_id")["kl"]
    out = {}
    for (agent, key), g in rows.groupby(["agent", "config_key"]):
        ratios = [
            t["kl"].mean() / base.reindex(t["problem_id"]).mean() for _, t in g.groupby("tau")
        ]
        out[(agent, key)] = float(sum(ratios) / len(ratios))
    return pd.Series(out, dtype=float)


def difference_se(tuned: pd.DataFrame, default: pd.DataFrame, uniform: pd.DataFrame) -> float:
    """The standard error of tuned minus default normalised KL, over the seed groups both
    ran (the reference's error-bar groups): whether a tuned config's gain is beyond noise."""
    def by_group(rows: pd.DataFrame) -> pd.Series:
        groups = rows["problem_id"].map(seed_group)
        return pd.Series({g: normalised(rows[groups == g], uniform).iloc[0] for g in set(groups)})

    diffs = (by_group(tuned) - by_group(default)).dropna()
    return float(diffs.std(ddof=1) / math.sqrt(len(diffs))) if len(diffs) > 1 else math.nan


def choose(rows: pd.DataFrame, uniform: pd.DataFrame, selection: Sequence[str]) -> dict:
    """Each agent's config (a dict) with the lowest normalised KL over the selection
    problems; rows of any other problem are refused: the held-out groups never decide."""
    outside = sorted(set(rows["problem_id"]) - set(selection))
    if outside:
        raise InputError(
            f"rows: got {len(outside)} problem(s) outside the selection group (first: "
            f"{outside[0]}); allowed: the selection group's problems only"
        )
    scores = normalised(rows, uniform[uniform["problem_id"].isin(set(selection))])
    chosen = {}
    for agent, s in scores.groupby(level=0):
        key = s.sort_values(kind="stable").index[0][1]
        config = rows[rows["config_key"] == key]["config"].iloc[0]
        chosen[agent] = json.loads(config) if isinstance(config, str) else dict(config)
    return chosen


def _run(jobs: Sequence, results: str, workers: int, shipped: bool = True) -> None:
    """The jobs through the leaderboard's sweep; those the package ships are recorded, not
    run, unless `shipped` is False (every job computed here)."""
    from experiments.reproduction import take_shipped
    from leaderboard.execution.sweeping import make_executor, run

    if shipped:
        take_shipped(jobs, results)
    run(jobs, results, make_executor("local", workers=workers))


def distinct(jobs: Sequence) -> list:
    """`jobs` each once, in order: a config chosen at its default gives the held-out jobs
    twice (tuned and default), which are one run each."""
    return list({j.key: j for j in jobs}.values())


def _rows(results: str, jobs: Sequence) -> pd.DataFrame:
    import leaderboard

    df = leaderboard.load(results)
    return df[df["key"].isin({j.key for j in jobs})]


def select(agent: str, selection: Sequence[str], results: str, workers: int = 1,
           shipped: bool = True) -> list:  # fmt: skip
    """Runs `agent`'s sweep on the selection problems (halved for HALVED agents) and
    returns every job that ran, for `choose`."""
    from leaderboard.execution.sweeping import plan

    if agent not in HALVED:
        jobs = plan([agent], list(selection), configs="sweep")
        _run(jobs, results, workers, shipped)
        return jobs
    first = plan([agent], first_round(selection), configs="sweep")
    _run(first, results, workers, shipped)
    uniform = _uniform(first_round(selection), results, workers, shipped)
    scores = normalised(_rows(results, first), uniform).sort_values(kind="stable")
    kept = {key for _, key in scores.index[: max(1, math.ceil(len(scores) * KEEP))]}
    rest = [p for p in selection if p not in set(first_round(selection))]
    second = [j for j in plan([agent], rest, configs="sweep") if j.config_key in kept]
    _run(second, results, workers, shipped)
    return [j for j in first if j.config_key in kept] + second


def _uniform(problem_ids: Sequence[str], results: str, workers: int,
             shipped: bool = True) -> pd.DataFrame:  # fmt: skip
    from leaderboard.execution.sweeping import plan

    jobs = plan([NORMALISER], list(problem_ids))
    _run(jobs, results, workers, shipped)
    return _rows(results, jobs)


def tune(agents: Sequence[str], group: int, results: str, workers: int = 1,
         shipped: bool = True) -> pd.DataFrame:  # fmt: skip
    """Selects each agent's config on seed group `group`, runs it and the default on the
    held-out groups, and returns the table: per agent, the chosen config's normalised KL
    in-sample (the selection group) and held out, the default's held out, and the standard
    error of their held-out difference over the seed groups. `shipped` False computes every
    job here rather than taking the package's runs."""
    import generative
    from leaderboard.execution.sweeping import plan

    selection, held_out = split(generative.sweep_ids(SWEEP), group)
    uniform = _uniform(selection + held_out, results, workers, shipped)
    table = []
    for agent in agents:
        jobs = select(agent, selection, results, workers, shipped)
        chosen = choose(_rows(results, jobs), uniform, selection)[agent]
        tuned = plan([agent], held_out, overrides=chosen)
        default = plan([agent], held_out)
        _run(distinct(tuned + default), results, workers, shipped)
        mine = [j for j in jobs if j.config_key == tuned[0].config_key]
        inside = normalised(_rows(results, mine), uniform)
        tuned_rows, default_rows = _rows(results, tuned), _rows(results, default)
        scored = normalised(pd.concat([tuned_rows, default_rows]), uniform)
        table.append({
            "agent": agent,
            "tuned_held_out": scored.get((agent, tuned[0].config_key), math.nan),
            "tuned_in_sample": inside.get((agent, tuned[0].config_key), math.nan),
            "default_held_out": scored.get((agent, default[0].config_key), math.nan),
            "difference": (scored.get((agent, tuned[0].config_key), math.nan)
                           - scored.get((agent, default[0].config_key), math.nan)),
            "difference_se": difference_se(tuned_rows, default_rows, uniform),
            "tuned_config": ", ".join(f"{k}={v}" for k, v in sorted(chosen.items())),
            "config": json.dumps(chosen, sort_keys=True),
        })  # fmt: skip
    return pd.DataFrame(table)


def ship(table: pd.DataFrame, results: str, path: Path) -> str:
    """Each tuned agent's chosen config on every problem of the sweep (the selection
    group's and the held-out ones), from the store, merged into our shipped tuned runs at
    `path` (`tuned_runs.write_tuned`: an agent shipped here replaces its rows of this sweep; the
    others are kept); says what it wrote. An agent with a job not finished is left out
    and named."""
    import generative
    from experiments.tuned_runs import write_tuned
    from leaderboard.execution.shipped_store import from_results
    from leaderboard.execution.sweeping import plan
    from leaderboard.store import ResultsStore

    ids = generative.sweep_ids(SWEEP)
    with ResultsStore(results, mode="r") as store:
        done = store.keys("ok")
    keys, partial = set(), []
    for _, row in table.iterrows():
        jobs = plan([row["agent"]], ids, overrides=json.loads(row["config"]))
        if all(j.key in done for j in jobs):
            keys |= {j.key for j in jobs}
        else:
            partial.append(row["agent"])
    if not keys:
        raise InputError(
            f"--ship: no tuned agent has all its {len(ids)} jobs finished in {results!r} "
            f"(unfinished: {', '.join(partial)}); allowed: a store where tune_references "
            "ran an agent to its end"
        )
    said = write_tuned(from_results(results, keys), results, path)
    return said + (f"; not shipped, some job unfinished: {', '.join(partial)}" if partial else "")


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.console import (
        add_store_options,
        bad_input,
        check_not_empty,
        check_range,
        script_parser,
        setup_logging,
        split_choices,
    )
    from leaderboard.outputs import check_output_path, write_atomically

    parser = script_parser("tune_references", " ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--agents", default=",".join(AGENTS), help="agents to tune")
    parser.add_argument("--group", type=int, default=0, help="the selection seed group, 0-9")
    add_store_options(parser, "tuned.db", "tuned.csv", "the table (CSV)")
    parser.add_argument("--ship", default=None, metavar="CSV.GZ",
                        help="merge the tuned configs' runs into ours (tuned_references.csv.gz)")
    parser.add_argument("--no-shipped", action="store_true",
                        help="compute every job here, none taken from our shipped runs")
    args = parser.parse_args(argv)
    setup_logging()
    try:
        agents = split_choices(args.agents, "--agents", AGENTS)
        check_range("--group", args.group, 0, 9)
        check_range("--workers", args.workers, 0, 64)
        check_not_empty("--results", args.results, "a results file such as tuned.db")
        check_output_path("--out", args.out, [args.results], suffixes=(".csv",))  # before a job
        if args.ship:
            check_output_path("--ship", Path(args.ship), [args.results], suffixes=(".csv.gz",))
            if args.group != 0:
                raise InputError(f"--group: got {args.group} with --ship; allowed: 0 (ours)")
        table = tune(agents, args.group, args.results, args.workers, not args.no_shipped)
        write_atomically("--out", args.out, lambda tmp: table.to_csv(tmp, index=False))
        print(table.drop(columns="config").to_string(index=False))
        if args.ship:  # after the table is written: a refusal here loses nothing
            print(ship(table, args.results, Path(args.ship)), file=sys.stderr)
    except InputError as e:
        return bad_input("tune_references", e)
    return 0


if __name__ == "__main__":
    from experiments.console import interruptible

    sys.exit(interruptible("tune_references", main, ends_process=True))
