"""The L-C2ST paper's published rates, decoded from the authors' released results.

The authors' repository (JuliaLinhart/lc2st) keeps the outputs of the NeurIPS 2023
experiments as torch pickles under `saved_experiments/neurips2023/exp_2/<task>/results/`:
per test, 50 runs x 10 observations of rejections at alpha 0.05 against the NPE's training
budget (N_cal 10,000) and against N_cal (budget 1,000), the rejections on each method's
null draws against N_cal, and the mean statistic per budget. `decode` turns
them into one row per (experiment, task, budget, N_cal, method, statistic), shipped as
`leaderboard/data/lc2st_published.csv` and shown beside our runs.

Run (with a checkout of the authors' repository; it loads their pickles with torch's
weights-only loader, numpy arrays allowed):
    python -m experiments.lc2st_published PATH/TO/lc2st [--out CSV]
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from testbed.errors import InputError

TASKS = (
    "two_moons",
    "slcp",
    "gaussian_mixture",
    "gaussian_linear_uniform",
    "bernoulli_glm",
    "bernoulli_glm_raw",
)
RESULTS = (
    "results/alpha_0.05_n_trials_null_100/n_eval_10000_n_ensemble_1_cross_val_False/"
    "bonferonni_False_mean_obs_False_mean_runs_True"
)
SOURCE = "JuliaLinhart/lc2st@eb1bd5f saved_experiments/neurips2023/exp_2/<task>/" + RESULTS
METHODS = {"c2st": "oracle_c2st", "lc2st": "lc2st", "lc2st_nf": "lc2st_nf", "lhpd": "lhpd"}
BUDGETS = (100, 1_000, 10_000, 100_000)  # the order of avg_results_n_train's lists
BUDGET_SWEEP_NCAL = 10_000  # the paper's N_CAL_EXP1: the budget sweep's N_cal
NCAL_SWEEP_BUDGET = 1_000  # the paper's N_TRAIN_EXP2: the N_cal sweep's budget
PUBLISHED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "lc2st_published.csv"
COLUMNS = [
    "kind",
    "task",
    "budget",
    "n_cal",
    "diagnostic",
    "statistic",
    "runs",
    "tests",
    "rate",
    "mean_T",
]


def load(path: Path):
    """One of the authors' torch pickles, with only numpy arrays and scalars allowed."""
    import torch

    core = np._core.multiarray
    allowed = [  # the authors' pickles name numpy 1's module paths; numpy 2 writes its own
        (core._reconstruct, "numpy.core.multiarray._reconstruct"),
        (core.scalar, "numpy.core.multiarray.scalar"),
        core._reconstruct,
        core.scalar,
        np.ndarray,
        np.dtype,
        type(np.dtype("float64")),
        type(np.dtype("float32")),
        type(np.dtype("int64")),
        type(np.dtype("bool")),
    ]
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, weights_only=True)
    except (OSError, RuntimeError, pickle.UnpicklingError) as e:  # missing, damaged, foreign
        reason = " ".join(str(e).split())[:200]
        raise InputError(
            f"repo: {str(path)!r} cannot be read as the authors' results ({reason}); "
            "allowed: a checkout of JuliaLinhart/lc2st with its saved_experiments"
        ) from None


def _rates(table: dict, kind: str, task: str, axis: str, fixed: int) -> list[dict]:
    """Rows of one rejections table: {axis value: {method: {statistic: [runs x [10]]}}}."""
    rows = []
    for value, methods in table.items():
        for method, stats in methods.items():
            for statistic, runs in stats.items():
                if statistic == "div" or not len(runs):
                    continue
                rejected = np.asarray([np.asarray(r, float) for r in runs])
                budget, n_cal = (value, fixed) if axis == "budget" else (fixed, value)
                rows.append(
                    {
                        "kind": kind,
                        "task": task,
                        "budget": int(budget),
                        "n_cal": int(n_cal),
                        "diagnostic": METHODS[method],
                        "statistic": statistic,
                        "runs": rejected.shape[0],
                        "tests": rejected.size,
                        "rate": float(rejected.mean()),
                    }
                )
    return rows


def _budget_means(avg: dict, rows: list[dict], task: str) -> None:
    """The mean statistic per budget (avg_results_n_train) into `rows`."""
    for row in rows:
        if row["kind"] != "power" or row["task"] != task or row["n_cal"] != BUDGET_SWEEP_NCAL:
            continue
        method = {v: k for k, v in METHODS.items()}[row["diagnostic"]]
        i = BUDGETS.index(row["budget"])
        means = avg[method]["t_stat_mean"].get(row["statistic"], [])
        row["mean_T"] = float(means[i]) if len(means) > i else float("nan")


def decode(repo: Path):
    """The published rates of every task found under `repo` (a checkout of the authors'
    repository), one row per (kind, task, budget, N_cal, method, statistic)."""
    import pandas as pd

    rows: list[dict] = []
    found = []
    for task in TASKS:
        folder = repo / "saved_experiments" / "neurips2023" / "exp_2" / task / RESULTS
        if not folder.is_dir():
            continue
        found.append(task)
        task_rows = _rates(
            load(folder / "emp_power_dict_n_train.pkl"), "power", task, "budget", BUDGET_SWEEP_NCAL
        )
        task_rows += _rates(
            load(folder / "emp_power_dict_n_cal.pkl"), "power", task, "n_cal", NCAL_SWEEP_BUDGET
        )
        task_rows += _rates(
            load(folder / "type_I_error_dict_n_cal.pkl"), "null", task, "n_cal", NCAL_SWEEP_BUDGET
        )
        _budget_means(load(folder / "avg_results_n_train.pkl"), task_rows, task)
        rows += task_rows
    if not found:
        raise InputError(
            f"repo: got {str(repo)!r}, which holds no saved_experiments/neurips2023/exp_2/"
            f"<task>/{RESULTS}; allowed: a checkout of JuliaLinhart/lc2st"
        )
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS)
    # the budget sweep's N_cal 10,000 at budget 1,000 is the N_cal sweep's last point too
    return frame.drop_duplicates(COLUMNS[:6]).sort_values(COLUMNS[:6]).reset_index(drop=True)


def read_published():
    """The shipped published rates (an empty frame if the file is absent)."""
    import pandas as pd

    if not PUBLISHED.exists():
        return pd.DataFrame(columns=COLUMNS)
    return pd.read_csv(PUBLISHED, comment="#", keep_default_na=False, na_values=[""])  # "null"


def write(frame, path: Path) -> None:
    from leaderboard.outputs import write_atomically

    header = (
        "# The L-C2ST paper's rates (Linhart, Gramfort and Rodrigues, NeurIPS 2023), decoded by "
        "experiments/lc2st_published.py from " + SOURCE + " (emp_power_dict_n_train, "
        "emp_power_dict_n_cal, type_I_error_dict_n_cal, avg_results_n_train). rate: share "
        "of the runs x 10 observations rejected at alpha 0.05; mean_T: the paper's mean "
        "statistic at each budget (N_cal 10,000).\n"
    )

    def dump(tmp: Path) -> None:
        with open(tmp, "w") as f:
            f.write(header)
            frame.to_csv(f, index=False, float_format="%.6g")

    write_atomically("--out", path, dump)


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.console import OneLineParser, bad_input

    parser = OneLineParser(
        prog="python -m experiments.lc2st_published",
        name="lc2st_published",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("repo", help="a checkout of JuliaLinhart/lc2st")
    parser.add_argument("--out", default=str(PUBLISHED), help="the CSV to write")
    args = parser.parse_args(argv)
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    try:
        from leaderboard.outputs import check_output_path

        check_output_path("--out", Path(args.out), suffixes=(".csv",))
        frame = decode(Path(args.repo))
        write(frame, Path(args.out))
    except InputError as e:
        return bad_input("lc2st_published", e)
    print(f"{len(frame)} rows -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
