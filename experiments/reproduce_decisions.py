"""From predictions to decisions: does the joint KL predict an agent's regret as a Thompson
sampler where the marginal KL does not? (The Neural Testbed's bandit, v4 paper's claim.)

Runs the testbed figure's seven agents, the epinet and `uniform` on the `bandit` family
(the reference's setting d = 2, T = 0.1; and T = 0.5, and d = 10) through the
leaderboard's sweep (a results store: an interrupted run resumes where it stopped), seed
by seed so a partial run is balanced, then writes into --out

- `regret.md` / `regret.csv`: average regret per agent and environment, mean over seeds
  with a 95% bootstrap interval;
- `correlation.md` / `correlation.csv`: per environment, the rank (Spearman) and linear
  (Pearson) correlation across agents of average regret with the joint KL (tau = 10) and
  with the marginal KL (tau = 1) of the same agents on the classification problems of the
  same generator (d = 2: `classification_2d` at the same temperature, from the runs the
  package ships), with 95% bootstrap intervals over seeds and problems;
- `regret_vs_kl.png`: regret against each KL, and the regret curves.

The package ships our runs (`leaderboard/data/decisions_ours.csv.gz`): `--report` tables
them on a fresh install. Run:
    python -m experiments.reproduce_decisions --results decisions.db --out decisions/
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from testbed.errors import InputError

AGENTS = ("uniform", "mlp", "ensemble", "ensemble+", "dropout", "bbb", "hypermodel", "sgmcmc",
          "epinet")  # fmt: skip
SHIPPED = "decisions_ours"  # our shipped runs (leaderboard.shipped_files.SOURCES)
SHIPPED_FILE = Path(__file__).resolve().parents[1] / "leaderboard/data/decisions_ours.csv.gz"


def problem_ids(seeds: Sequence[int], environments: Sequence[tuple[int, float]]) -> list[str]:
    """The bandit ids of `seeds` in `environments`, seed by seed (a partial run is balanced)."""
    from generative.bandit import TABLE

    index = {(r["input_dim"], r["temperature"], r["seed"]): i for i, r in enumerate(TABLE)}
    out = []
    for seed in seeds:
        for d, t in environments:
            if (d, t, seed) not in index:
                raise InputError(
                    f"--seeds: got {seed!r} in environment d={d}, T={t}; allowed: seeds in "
                    f"0..{max(r['seed'] for r in TABLE)}"
                )
            out.append(f"bandit/{index[(d, t, seed)]}")
    return out


def kl_problem_ids(input_dim: int, temperature: float) -> list[str]:
    """The testbed problems of the bandit's generator (d, T) that the package does not ship
    runs of: `classification`'s cells at d and T, tau 1 and 10 (d = 2 is shipped)."""
    import generative
    from experiments.decisions_report import KL_FAMILIES

    family = KL_FAMILIES.get(int(input_dim))
    if family is None or family == "classification_2d":
        return []
    out = []
    for pid in generative.sweep_ids(family):
        s = generative.problem_settings(pid)
        if s["input_dim"] == input_dim and s["temperature"] == temperature and s["tau"] in (1, 10):
            out.append(pid)
    return out


def run(agents: Sequence[str], seeds: Sequence[int], results: str, workers: int = 1) -> bool:
    """Every agent on every bandit of `seeds`: d = 2 first (both temperatures, seed by seed),
    then the testbed problems of d = 10's generator (its KL side), then the d = 10
    bandits; jobs the package ships are recorded from it, not run. True when some job is
    stored as failed."""
    import leaderboard
    from generative.bandit import ENVIRONMENTS

    two = [e for e in ENVIRONMENTS if e[0] == 2]
    rest = [e for e in ENVIRONMENTS if e[0] != 2]
    batches = [problem_ids([seed], two) for seed in seeds]
    batches += [kl_problem_ids(d, t) for d, t in rest]
    batches += [problem_ids([seed], rest) for seed in seeds]
    failed = False
    for ids in batches:
        if ids:
            summary = leaderboard.sweep(list(agents), ids, results=results, workers=workers)
            failed |= bool(summary.any_failed)
    return failed


def load_frame(results: str, shipped: bool = True) -> pd.DataFrame:
    """The store's rows (when it exists) and our shipped runs of the jobs it does not hold."""
    import leaderboard
    from leaderboard.shipped_files import shipped as shipped_rows

    parts = []
    if Path(results).exists():
        parts.append(leaderboard.load(results))
    if shipped:
        ours = shipped_rows(SHIPPED)
        held = set(parts[0]["key"]) if parts else set()
        parts.append(ours[~ours["key"].isin(held)].rename(columns={"agent_seed": "seed"}))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not len(frame):
        raise InputError(
            f"--results: {results!r} holds no runs and no shipped runs are used; allowed: a "
            "store this script ran into (or leave out --no-shipped)"
        )
    return frame


def ship(results: str, path: str) -> str:
    """Our shipped runs with the store's finished jobs merged in (a job the store holds
    replaces the shipped one; every other shipped job is kept); says what it wrote."""
    from leaderboard.execution.shipped_store import from_results
    from leaderboard.ranking import shipped
    from leaderboard.shipped_files import shipped as shipped_rows

    new = from_results(results)
    old = shipped_rows(path=path) if Path(path).exists() else new.iloc[:0]
    kept = old[~old["key"].isin(set(new["key"]))]
    rows = pd.concat([kept, new], ignore_index=True)
    rows = rows.sort_values(["agent", "config_key", "problem_id", "agent_seed"], kind="stable")
    shipped.write(rows.reset_index(drop=True), path)
    return f"{path}: {len(rows)} jobs ({len(new)} from {results}, {len(kept)} kept)"


def parse(argv: Sequence[str] | None):
    from experiments.console import add_store_options, script_parser

    parser = script_parser("reproduce_decisions", " ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--agents", default=",".join(AGENTS), help="registered agents")
    parser.add_argument("--seeds", type=int, default=5, help="bandit seeds 0..SEEDS-1 (at most 10)")
    add_store_options(parser, "decisions.db", "decisions", "folder for the tables and the figure")
    parser.add_argument("--no-shipped", action="store_true", help="leave out our shipped runs")
    parser.add_argument(
        "--ship", default=None, metavar="CSV.GZ",
        help=f"merge the store's finished runs into our shipped ones ({SHIPPED_FILE.name})",
    )  # fmt: skip
    parser.add_argument("--report", action="store_true", help="run nothing: tables and figure")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from agents.registry import AGENTS as REGISTERED
    from experiments.console import (
        bad_input,
        check_range,
        setup_logging,
        shown_tables,
        split_choices,
    )
    from experiments.decisions_report import OUTPUTS, write
    from experiments.reproduction import run_unless_report
    from leaderboard.outputs import check_output_folder, check_output_path
    from testbed import threefry_cpu

    args = parse(argv)
    setup_logging()
    threefry_cpu.install()  # the entry point's: testbed's threefry lowering
    try:
        chosen = split_choices(args.agents, "--agents", REGISTERED.names())
        check_range("--seeds", args.seeds, 1, 10)
        check_range("--workers", args.workers, 0, 64)
        out = check_output_folder("--out", args.out, OUTPUTS, [args.results])
        if args.ship:
            check_output_path("--ship", Path(args.ship), [args.results], suffixes=(".csv.gz",))
        seeds = range(args.seeds)
        failed = run_unless_report(
            "reproduce_decisions", args, lambda: run(chosen, seeds, args.results, args.workers),
            ship, note=False,
        )  # fmt: skip
        frame = load_frame(args.results, shipped=not args.no_shipped)
        write(frame, out)
    except InputError as e:
        return bad_input("reproduce_decisions", e)
    return shown_tables(out, ("regret.md", "correlation.md"), failed)


if __name__ == "__main__":
    from experiments.console import interruptible

    sys.exit(interruptible("reproduce_decisions", main, ends_process=True))
