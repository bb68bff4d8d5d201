"""Our reference posteriors against the SBI benchmark's, at its 100 published observations.

For each task and observation k = 1..10: C2ST (sbibm semantics: z-scored, MLP (10 d, 10 d),
5 folds) between the 10,000 reference draws stored in the sbibm 1.1.0 wheel and 10,000
draws of our exact sampler at the same observation. 0.5 means indistinguishable; with
10,000 + 10,000 draws the accuracy of identical distributions stays within about
0.5 +- 0.01. Prints a markdown table (one row per task, worst and median) and writes every
value to --out (JSON).

Run: python -m experiments.check_sbibm_references [--wheel PATH] [--tasks two_moons,slcp]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

import numpy as np

from experiments.sbibm_wheel import SOURCES, Wheel, WheelError, download_wheel

NUM_SAMPLES = 10_000


def check_task(wheel: Wheel, task_name: str, observations=range(1, 11), num_samples=NUM_SAMPLES):
    """C2ST of ours vs the benchmark's reference draws, per observation: {k: c2st}."""
    import generative
    from testbed.metrics import c2st

    task = generative.sbi.get_task(task_name)
    out = {}
    for k in observations:
        theirs = wheel.reference_samples(task_name, k)[:num_samples]
        ours = task.reference_posterior(task.observation(k), len(theirs), seed=k)
        out[k] = float(c2st(theirs, ours))
    return out


def table(values: dict[str, dict[int, float]]) -> str:
    """Markdown: task, C2ST per observation, worst, median."""
    head = "| task | " + " | ".join(str(k) for k in range(1, 11)) + " | worst | median |"
    lines = [head, "|---" * 13 + "|"]
    for task, per_obs in values.items():
        cells = [f"{per_obs[k]:.3f}" if k in per_obs else "" for k in range(1, 11)]
        v = list(per_obs.values())
        lines.append(f"| {task} | " + " | ".join(cells) + f" | {max(v):.3f} | {np.median(v):.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from experiments.console import OneLineParser

    parser = OneLineParser(description=__doc__.splitlines()[0], name="check_sbibm_references")
    parser.add_argument("--wheel", help="a downloaded sbibm-1.1.0 wheel (default: pip download)")
    parser.add_argument("--tasks", default=",".join(SOURCES), help="comma-separated task names")
    parser.add_argument("--num-samples", type=int, default=NUM_SAMPLES)
    parser.add_argument("--out", default="sbibm_reference_c2st.json", help="JSON of every value")
    args = parser.parse_args(argv)
    from testbed import threefry_cpu

    threefry_cpu.install()  # the entry point's: testbed's threefry lowering (same bits)
    from experiments.console import EXIT_ENVIRONMENT, bad_input, check_range, split_choices
    from leaderboard.outputs import check_output_path, write_atomically
    from testbed.errors import InputError

    try:  # before the hours of checks
        tasks = split_choices(args.tasks, "--tasks", list(SOURCES))
        check_range("--num-samples", args.num_samples, 1, NUM_SAMPLES)
        check_output_path("--out", args.out)
        wheel = Wheel(args.wheel, "--wheel") if args.wheel else None
    except InputError as e:
        sys.exit(bad_input("check_sbibm_references", e))
    values = {}
    with tempfile.TemporaryDirectory() as folder:
        try:
            wheel = wheel or Wheel(download_wheel(folder))
        except WheelError as e:  # no package index here: the machine's, not the input's
            print(f"check_sbibm_references: error: {e}", file=sys.stderr)
            sys.exit(EXIT_ENVIRONMENT)
        for task in tasks:
            start = time.perf_counter()
            values[task] = check_task(wheel, task, num_samples=args.num_samples)
            shown = ", ".join(f"{v:.3f}" for v in values[task].values())
            print(f"{task}: {shown} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
            text = json.dumps(values, indent=1) + "\n"
            write_atomically("--out", args.out, lambda tmp, text=text: tmp.write_text(text))
    print(table(values))
    everything = [v for per in values.values() for v in per.values()]
    print(
        f"\nworst {max(everything):.3f}, median {np.median(everything):.3f} over {len(everything)}"
    )


if __name__ == "__main__":
    main()
