"""The tables of `experiments.ppl_power`: rejection rates with Wilson intervals, the
tests' level on the correct samplers against the binomial range of a 5% test, pooled over
the problems and problem by problem."""

from __future__ import annotations

import numpy as np

ALPHA = 0.05
ALL_PROBLEMS = tuple(f"wyb/{k}" for k in range(1, 22))
SAMPLERS = (
    "exact",
    "nuts",
    "nuts_ess",
    "warmup_5",
    "narrow_step",
    "prior_0.1",
    "correlated",
    "thinned",
)
CORRECT = ("exact", "nuts", "nuts_ess")  # samplers of the right posterior: their rate is a level
TESTS = ("pit_ks", "mahalanobis", "ddks")
TRIALS = 100


def summary(long, alpha: float = ALPHA):
    """Per (problem, sampler, n, measure): trials, rejections at `alpha` with a 95%
    Wilson interval (p-values), or the mean and sd of the value (the benchmark's KL, ESS)."""
    import pandas as pd

    from experiments.lc2st_report import wilson

    rows = []
    keys = ["problem", "sampler", "n", "measure"]
    for (problem, sampler, n, measure), g in long.groupby(keys, sort=False):
        values = g["value"].to_numpy(float)
        row = {"problem": problem, "sampler": sampler, "n": n, "measure": measure}
        row["trials"] = len(values)
        if measure in ("wyb_kl", "ess"):
            finite = values[np.isfinite(values)]
            sd = np.std(finite, ddof=1) if len(finite) > 1 else np.nan
            row.update(mean=np.mean(finite) if len(finite) else np.nan, sd=sd)
        else:
            k = int(np.sum(values < alpha))
            lo, hi = wilson(k, len(values))
            row.update(rejections=k, rate=k / len(values), low=lo, high=hi)
        rows.append(row)
    return pd.DataFrame(rows)


def level_bound(trials: int, alpha: float = ALPHA, quantile: float = 0.999) -> int:
    """The largest number of rejections in `trials` a test at level `alpha` makes with
    probability `quantile` (Binomial(trials, alpha)'s quantile): more is a level failure."""
    from scipy import stats

    return int(stats.binom.ppf(quantile, trials, alpha))


def _order(values, known) -> list:
    return sorted(set(values), key=lambda v: (known.index(v) if v in known else len(known), v))


def report(long) -> str:
    """The tables of the trials `long`: the tests' level on the correct samplers
    (`level_table`), every problem's trials pooled (rates only), then problem by problem
    (`markdown`)."""
    pooled = summary(long.assign(problem="all"))
    pooled = pooled[~pooled["measure"].isin(["wyb_kl", "ess"])]
    head = "Pooled over the problems (each measure over those it applies to):\n\n"
    tables = head + markdown(pooled) + "\n\nProblem by problem:\n\n" + markdown(summary(long))
    level = level_table(long)
    return tables if level is None else f"{level}\n\n{tables}"


def binomial_range(trials: int, alpha: float = ALPHA) -> tuple[float, float]:
    """The central 95% range of the rejection rate of a level-`alpha` test over `trials`
    independent trials (Binomial(trials, alpha)'s 2.5% and 97.5% quantiles, as rates)."""
    from scipy import stats

    low, high = stats.binom.ppf([0.025, 0.975], trials, alpha)
    return float(low) / trials, float(high) / trials


def level_table(long, alpha: float = ALPHA) -> str | None:
    """Each test's level on the correct samplers (`CORRECT`), pooled over the problems each
    ran: its rejection rate with a 95% Wilson interval, the central 95% range of a
    level-`alpha` test's rate at that many trials, whether the rate is inside it, and the
    problems whose own rate is above Binomial's 99.9% quantile (None: no such trials)."""
    from experiments.lc2st_report import wilson

    tests = [m for m in (*TESTS, "c2st") if m in set(long["measure"])]
    sub = long[long["sampler"].isin(CORRECT) & long["measure"].isin(tests)]
    if sub.empty:
        return None
    lines = [
        "The level of each test on the correct samplers, pooled over the problems each ran "
        f"(a test at {alpha} rejects inside the binomial range 95% of the time):",
        "",
        "| sampler | n | test | problems | trials | rejection rate [95%] | binomial range "
        "of a 5% test | inside | problems above the 99.9% bound |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by_problem = summary(sub)
    for sampler in _order(sub["sampler"], list(CORRECT)):
        for n in sorted(set(sub["n"])):
            for test in tests:
                rows = by_problem[
                    (by_problem["sampler"] == sampler) & (by_problem["n"] == n)
                    & (by_problem["measure"] == test)
                ]  # fmt: skip
                if rows.empty:
                    continue
                k, trials = int(rows["rejections"].sum()), int(rows["trials"].sum())
                lo, hi = binomial_range(trials, alpha)
                rate = k / trials
                wl, wh = wilson(k, trials)
                above = _order(
                    [r.problem for r in rows.itertuples() if r.rejections > level_bound(r.trials)],
                    ALL_PROBLEMS,
                )
                lines.append(
                    f"| {sampler} | {n} | {test} | {len(rows)} | {trials} | {rate:.3f} "
                    f"[{wl:.3f}, {wh:.3f}] | [{lo:.3f}, {hi:.3f}] | "
                    f"{'yes' if lo <= rate <= hi else 'no'} | {', '.join(above) or '-'} |"
                )
    return "\n".join(lines)


def markdown(table) -> str:
    """The table measure x sampler x n, a block per problem: rejection rates with 95%
    Wilson intervals and trials (C2ST's are fewer), the benchmark's KL as mean +- sd, the
    mean ESS of the chains scored; a level (a `CORRECT` sampler's) rate above
    Binomial(trials, 0.05)'s 99.9% quantile is marked `!`."""
    measures = [m for m in (*TESTS, "c2st", "wyb_adks", "wyb_kl") if m in set(table["measure"])]
    measures = list(dict.fromkeys(measures))
    with_ess = "ess" in set(table["measure"])
    lines = [
        "| problem | sampler | n | " + " | ".join(measures) + (" | ESS |" if with_ess else " |"),
        "|---|---|---|" + "---|" * (len(measures) + with_ess),
    ]
    by = {(r.problem, r.sampler, r.n, r.measure): r for r in table.itertuples()}
    for problem in _order(table["problem"], ALL_PROBLEMS):
        for sampler in _order(table["sampler"], SAMPLERS):
            for n in sorted(set(table["n"])):
                if not any((problem, sampler, n, m) in by for m in measures):
                    continue
                cells = []
                for m in measures:
                    r = by.get((problem, sampler, n, m))
                    if r is None:
                        cells.append("-")
                    elif m == "wyb_kl":
                        cells.append(f"{r.mean:.3g} ± {r.sd:.2g}")
                    else:
                        flag = (
                            " !"
                            if sampler in CORRECT and r.rejections > level_bound(r.trials)
                            else ""
                        )
                        cells.append(
                            f"{r.rate:.2f} [{r.low:.2f}, {r.high:.2f}]{flag}"
                            + ("" if r.trials == TRIALS else f" ({r.trials})")
                        )
                ess = by.get((problem, sampler, n, "ess"))
                if with_ess:
                    cells.append("-" if ess is None or np.isnan(ess.mean) else f"{ess.mean:.0f}")
                lines.append(f"| {problem} | {sampler} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
