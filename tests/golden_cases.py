"""Golden values: the full Quality of fixed (agent, problem) pairs and metrics on fixed samples.

Recorded before a structural change (`python tests/golden_cases.py --record`) and checked
by tests/test_golden.py after it: a refactor must leave every number as it was. The
pairs cover every problem family and every metric the problems compute; sizes are cut
through agent configs and problem options so the whole set runs in about a minute.
Timings (`*_seconds`, `*per_second`) are not compared.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

GOLDEN = Path(__file__).resolve().parent / "golden" / "qualities.json"
CLASSIFICATION = {"num_test_seeds": 100, "num_enn_samples": 100}
SMALL_NET = {"num_batches": 100}


class Case(NamedTuple):
    agent: str
    config: dict[str, Any]
    problem: str
    options: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.agent} on {self.problem}"


CASES = [
    # Neural Testbed: marginal (tau 1, Gaussian inputs) and joint (tau 10, dyadic inputs)
    Case("uniform", {}, "classification_2d/75", CLASSIFICATION),
    Case("oracle", {}, "classification_2d/75", CLASSIFICATION),
    Case("mlp", SMALL_NET, "classification_2d/75", CLASSIFICATION),
    Case("ensemble+", {**SMALL_NET, "num_ensemble": 4}, "classification_2d/75", CLASSIFICATION),
    Case("uniform", {}, "classification/200", CLASSIFICATION),
    Case("mlp", SMALL_NET, "classification/200", CLASSIFICATION),
    Case("ensemble+", {**SMALL_NET, "num_ensemble": 4}, "classification/200", CLASSIFICATION),
    Case("dropout", SMALL_NET, "classification_2d/285", CLASSIFICATION),
    # GP regression (added with issue 18): the sample-based Gaussian KL
    Case("gp_posterior", {}, "regression_test/0", {"num_test_seeds": 100}),
    Case("mlp", SMALL_NET, "regression_test/0", {"num_test_seeds": 100}),
    # real data (joint NLL on dyadic batches)
    Case("uniform", {}, "real/iris/10/1", CLASSIFICATION),
    Case("mlp", SMALL_NET, "real/iris/10/1", CLASSIFICATION),
    Case("ensemble+", {**SMALL_NET, "num_ensemble": 4}, "real/iris/10/1", CLASSIFICATION),
    # the coin (exact joint KL by enumeration)
    Case("beta_bernoulli", {}, "coin/13", {}),
    Case("uniform", {}, "coin/4", {}),
    # conjugate models: exact posterior and NUTS, Gaussian and bounded families
    Case("exact", {}, "conjugate/wyb/1", {"num_null": 20}),
    Case("nuts", {"num_warmup": 200, "num_samples": 250, "num_chains": 2}, "conjugate/wyb/1",
         {"num_null": 20}),
    Case("exact", {}, "conjugate/beta_binomial/1", {"num_null": 20}),
    Case("nuts", {"num_warmup": 200, "num_samples": 250, "num_chains": 2},
         "conjugate/beta_binomial/1", {"num_null": 20}),
    # SBI benchmark tasks, and a conjugate problem seen as a simulator
    # SBI tasks at our seeded observations (recorded before the benchmark's were shipped)
    Case("rej_abc", {}, "sbi/two_moons/1000/1/seeded", {"num_samples": 1000}),
    Case("npe", {"max_num_epochs": 3}, "sbi/two_moons/1000/1/seeded", {"num_samples": 1000}),
    Case("rej_abc", {}, "sbi/gaussian_linear/1000/2/seeded", {"num_samples": 1000}),
    Case("npe", {"max_num_epochs": 3}, "sbi/gaussian_linear/1000/2/seeded", {"num_samples": 1000}),
    Case("oracle", {}, "sbi/gaussian_linear/1000/2/seeded", {"num_samples": 1000}),
    # ... and at the SBI benchmark's published observations (recorded with them, issue 17)
    Case("rej_abc", {}, "sbi/two_moons/1000/1", {"num_samples": 1000}),
    Case("npe", {"max_num_epochs": 3}, "sbi/gaussian_linear/1000/2", {"num_samples": 1000}),
    Case("oracle", {}, "sbi/slcp/1000/1", {"num_samples": 1000}),
    Case("rej_abc", {}, "conjugate_sbi/beta_binomial/1/1000", {"num_null": 20}),
]  # fmt: skip


def run_case(case: Case) -> dict[str, float]:
    import agents
    import generative
    import testbed

    agent = agents.load(case.agent, **case.config)
    problem = generative.load(case.problem, **case.options)
    quality = testbed.evaluate(agent, problem)
    return {k: v for k, v in quality.items() if not is_timing(k)}


def is_timing(key: str) -> bool:
    """Keys that measure time (never compared)."""
    return key.endswith("_seconds") or key.endswith("per_second")


def _samples(seed: int, n: int, d: int, shift: float = 0.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(shift, 1.0, size=(n, d))


def metric_values() -> dict[str, float]:
    """Posterior metrics on fixed samples (c2st, mmd, L-C2ST and the calibration tests)."""
    from testbed import metrics

    ref, close = _samples(0, 1000, 2), _samples(1, 1000, 2, shift=0.3)
    out = {
        "c2st": metrics.c2st(ref, close),
        "c2st_auc": metrics.c2st_auc(ref, close),
        "mmd": metrics.mmd(ref, close),
        "posterior_mean_error": metrics.posterior_mean_error(ref, close),
        "posterior_variance_ratio": metrics.posterior_variance_ratio(ref, close),
        "median_distance": metrics.median_distance(np.zeros(2), close),
    }
    rng = np.random.default_rng(2)
    theta = rng.normal(size=(400, 2))
    x = theta + rng.normal(size=(400, 2))
    q = theta + 0.3 * rng.normal(size=(400, 2))  # one posterior draw per simulation
    theta_o = rng.normal(0.2, 1.0, size=(400, 2))
    result = metrics.get("lc2st").fn(theta, x, q, theta_o, np.zeros((1, 2)), num_trials_null=20)
    out.update({f"lc2st_{k}": v for k, v in result.items()})
    post = theta[:, None, :] + 0.5 * rng.normal(size=(400, 50, 2))
    ranks = metrics.sbc_ranks(theta, post)
    out["sbc_rank_mean"] = float(np.mean(ranks))
    sbc = metrics.check_sbc(ranks, 50)
    for i in range(2):
        out[f"sbc_ks_pval_{i}"], out[f"sbc_c2st_{i}"] = sbc.ks_pvals[i], sbc.c2st_ranks[i]
    tarp = metrics.tarp(theta, post, seed=0)
    out.update({f"tarp_{k}": float(v) for k, v in vars(tarp).items() if np.ndim(v) == 0})
    return {k: float(v) for k, v in out.items()}


def compute_all(verbose: bool = False) -> dict[str, dict[str, float]]:
    out = {}
    for case in CASES:
        start = time.perf_counter()
        out[case.name] = run_case(case)
        if verbose:
            print(f"{time.perf_counter() - start:6.1f} s  {case.name}", file=sys.stderr)
    start = time.perf_counter()
    out["metrics on fixed samples"] = metric_values()
    if verbose:
        print(f"{time.perf_counter() - start:6.1f} s  metrics", file=sys.stderr)
    return out


def _encode(values: dict[str, float]) -> dict[str, Any]:
    return {k: (v if math.isfinite(v) else str(v)) for k, v in sorted(values.items())}


def decode(values: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in values.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help=f"write {GOLDEN}")
    args = parser.parse_args()
    values = compute_all(verbose=True)
    if args.record:
        GOLDEN.parent.mkdir(exist_ok=True)
        text = json.dumps({k: _encode(v) for k, v in values.items()}, indent=1)
        GOLDEN.write_text(text + "\n")
        print(f"recorded {len(values)} cases -> {GOLDEN}", file=sys.stderr)
    else:
        print(json.dumps({k: _encode(v) for k, v in values.items()}, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
