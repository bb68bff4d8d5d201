"""Does the testbed's KL predict real-data NLL? (the Neural Testbed's synthetic-vs-real figure)

For each config of an agent's hyper-parameter sweep, runs the agent on synthetic
problems (mean KL) and on real-data problems (mean joint NLL), then correlates the two
across configs (Pearson and Spearman) with a bootstrap percentile interval (configs
resampled with replacement). Small defaults run in about a minute:

    python -m experiments.real_vs_synthetic --agent average_class_probs \
        --grid pseudo_count=0,1,10,100,1000

An in-process quick look (shrunk estimators, nothing stored); the full reproduction,
through a results store, is `python -m experiments.reproduce_real_data`.

`--grid key=v1,v2` (one per field, cartesian product) builds the configs; without it the
agent's registered sweep is used (first --max-configs). `--num-test-seeds` /
`--num-enn-samples` shrink every problem's estimator (0 keeps the problem's own N, M).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import agents
import generative
import testbed
from experiments.console import OneLineParser, bad_input, check_range, parse_pairs
from experiments.correlation import MIN_PAIRS as MIN_CONFIGS
from experiments.correlation import bootstrap_pairs as bootstrap_correlation
from generative.registry import FAMILIES
from testbed.errors import InputError

DEFAULT_SYNTHETIC = "classification_test"
DEFAULT_REAL = "real_offline_test"


def agent_configs(
    name: str, grid: dict[str, list[str]], fixed: dict[str, str], max_configs: int
) -> list[agents.ConfiguredAgent]:
    """The grid's cartesian product over `fixed`, or the agent's registered sweep."""
    if grid:
        keys = list(grid)
        return [
            agents.load(name, **fixed, **dict(zip(keys, values)))
            for values in itertools.product(*(grid[k] for k in keys))
        ]
    sweep = agents.sweep(name)[:max_configs]
    if fixed:
        return [agents.load(name, **{**a.config_dict(), **fixed}) for a in sweep]
    return sweep


SCORES = {"synthetic": "kl_estimate", "real": "joint_nll"}  # what each kind of problem ranks


def load_problem(problem_id: str, estimator: dict[str, int]):
    """The problem of an id, with its estimator sizes overridden where it has them."""
    settings = generative.problem_settings(problem_id)
    family = settings.pop("family")  # build() gets what generative.load gives it
    for key, value in estimator.items():
        if value and key in settings:
            settings[key] = value
    return FAMILIES.get(family).build(settings)


def run_jobs(
    configs: Sequence[agents.ConfiguredAgent],
    problem_ids: dict[str, list[str]],
    estimator: dict[str, int],
    log=print,
) -> list[dict[str, Any]]:
    """One row per (config, problem): kind (synthetic / real), config index, Quality."""
    rows = []
    for kind, ids in problem_ids.items():
        for pid in ids:
            problem = load_problem(pid, estimator)
            tau = generative.problem_settings(pid).get("tau", 1)
            for i, agent in enumerate(configs):
                quality = testbed.evaluate(agent, problem)
                name = SCORES[kind]
                row = {"kind": kind, "tau": tau, "config": i, "problem_id": pid, **quality}
                rows.append({**row, "score": quality[name]})
                log(f"{kind:9s} config {i:3d} {pid}: {name} {quality[name]:.4g}")
    return rows


def per_config_means(
    rows: list[dict[str, Any]], num_configs: int, tau: int | None = None
) -> dict[str, np.ndarray]:
    """Mean score per config and kind (synthetic KL, real joint NLL), at one tau or all."""
    out = {}
    for kind in ("synthetic", "real"):
        sums, counts = np.zeros(num_configs), np.zeros(num_configs)
        for r in rows:
            if r["kind"] == kind and (tau is None or r["tau"] == tau):
                sums[r["config"]] += r["score"]
                counts[r["config"]] += 1
        out[kind] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return out


def correlations(
    rows: list[dict[str, Any]], num_configs: int, num_bootstrap: int = 1000, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """Per tau found in both kinds (and "all": means over every problem): the per-config
    means and their Pearson / Spearman correlations with bootstrap intervals."""
    taus = sorted(
        {r["tau"] for r in rows if r["kind"] == "synthetic"}
        & {r["tau"] for r in rows if r["kind"] == "real"}
    )
    out = {}
    for tau in [*taus, None]:
        means = per_config_means(rows, num_configs, tau)
        entry = {k: v.tolist() for k, v in means.items()}
        for method in ("pearson", "spearman"):
            entry[method] = bootstrap_correlation(
                means["synthetic"], means["real"], method, num_bootstrap, seed=seed
            )
        out["all" if tau is None else f"tau={tau}"] = entry
    return out


def _ids(spec: str, field: str) -> list[str]:
    """A sweep name, or comma-separated problem ids (each once, none empty)."""
    from experiments.console import split_items

    if spec in generative.sweep_names():
        return generative.sweep_ids(spec)
    ids = split_items(spec, field, what="problem ids, or a sweep name")
    for problem_id in ids:  # before any job runs
        try:
            generative.problem_settings(problem_id)
        except InputError as e:  # said with the option's name; a sweep name among ids too
            swept = problem_id in generative.sweep_names()
            also = f"; or one sweep name alone, such as {DEFAULT_SYNTHETIC}" if swept else ""
            raise InputError(f"{field}: {str(e).removeprefix('problem id: ')}{also}") from None
    return ids


def _grid(agent: str, pairs: Sequence[str]) -> dict[str, list[str]]:
    """`--grid key=v1,v2` options as `reproduce_real_data` reads them: each a field of the
    agent, given once, its values each once and none empty (a list field's separated by
    ';': hidden_sizes=50,50;100)."""
    from agents.registry import AGENTS
    from experiments.reproduce_real_data import parse_grid
    from testbed.config import field_types

    return parse_grid(pairs, {agent: field_types(AGENTS.get(agent).config_cls)})


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = OneLineParser(description=__doc__.splitlines()[0], name="real_vs_synthetic")
    parser.add_argument("--agent", required=True)
    parser.add_argument("--grid", action="append", default=[], help="key=v1,v2,... (one per field)")
    parser.add_argument("--set", action="append", default=[], help="key=value fixed override")
    parser.add_argument("--max-configs", type=int, default=8)
    parser.add_argument("--synthetic", default=DEFAULT_SYNTHETIC, help="sweep name or ids")
    parser.add_argument("--real", default=DEFAULT_REAL, help="sweep name or ids")
    parser.add_argument("--num-test-seeds", type=int, default=200)
    parser.add_argument("--num-enn-samples", type=int, default=100)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="CSV file for the per-job rows")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    if args.out:  # before any job runs
        from leaderboard.outputs import check_output_path

        check_output_path("--out", args.out)

    ids = {"synthetic": _ids(args.synthetic, "--synthetic"), "real": _ids(args.real, "--real")}
    grid = _grid(args.agent, args.grid)
    check_range("--max-configs", args.max_configs, MIN_CONFIGS, 100_000)
    configs = agent_configs(args.agent, grid, parse_pairs(args.set), args.max_configs)
    if len(configs) < MIN_CONFIGS:  # before any job runs
        field, what = ("--grid", "its product") if grid else ("--agent", f"{args.agent}'s sweep")
        raise InputError(f"{field}: {what} has {len(configs)} config(s); allowed: at least "
                         f"{MIN_CONFIGS} to correlate (--grid key=v1,v2,v3)")  # fmt: skip
    estimator = {"num_test_seeds": args.num_test_seeds, "num_enn_samples": args.num_enn_samples}
    log = (lambda *_: None) if args.quiet else print
    rows = run_jobs(configs, ids, estimator, log=log)
    result = {
        "configs": [c.config_dict() for c in configs],
        **correlations(rows, len(configs), args.bootstrap, args.seed),
    }
    if args.out:
        import pandas as pd

        from leaderboard.outputs import write_atomically

        frame = pd.DataFrame(rows)
        write_atomically("--out", args.out, lambda tmp: frame.to_csv(tmp, index=False))
    if not args.quiet:
        for group, entry in result.items():
            if group == "configs":
                continue
            print(f"[{group}] config | synthetic KL | real NLL")
            for i, c in enumerate(configs):
                print(f"  {c.config_dict()} | {entry['synthetic'][i]:.4f} | {entry['real'][i]:.4f}")
            for method in ("pearson", "spearman"):
                r = entry[method]
                print(
                    f"  {method}: {r['estimate']:.3f} (95% bootstrap interval {r['low']:.3f} .. "
                    f"{r['high']:.3f}; {r['num_dropped']} degenerate resamples dropped)"
                )
    return result


if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        sys.exit(bad_input("real_vs_synthetic", e))
