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

import argparse
import sys
from collections.abc import Sequence

from testbed.errors import InputError

AGENTS = ("uniform", "mlp", "ensemble", "ensemble+", "dropout", "bbb", "hypermodel", "sgmcmc",
          "epinet")  # fmt: skip
BASELINES = ("uniform",)  # the floor; mlp (greedy: one function) is the trap


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


def run(agents: Sequence[str], seeds: Sequence[int], results: str, workers: int = 1) -> None:
    """Every agent on every bandit of `seeds`, d = 2 first (both temperatures), then d = 10."""
    import leaderboard
    from generative.bandit import ENVIRONMENTS

    two = [e for e in ENVIRONMENTS if e[0] == 2]
    rest = [e for e in ENVIRONMENTS if e[0] != 2]
    for environments in (two, rest):
        for seed in seeds:
            ids = problem_ids([seed], environments)
            leaderboard.sweep(list(agents), ids, results=results, workers=workers)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.reproduce_decisions")
    parser.add_argument("--results", default="decisions.db")
    parser.add_argument("--seeds", type=int, default=5, help="bandit seeds 0..N-1 (at most 10)")
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    run(args.agents.split(","), range(args.seeds), args.results, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
