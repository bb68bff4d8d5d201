"""The lines said under the rankings: failed jobs and how to see them, the sweep's
problems not run yet, what each rule says its tables leave out, the scope of a ranking
without a sweep, and what the tables leave out of our shipped runs."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from leaderboard.ranking import shipped as shipped_runs
from leaderboard.ranking.standings import Board


def failures_command(results: str | os.PathLike, sweep: str | None = None) -> str:
    """The command that lists the failed jobs of `results` (of `sweep` when given)."""
    command = f"testbed leaderboard --failures --results {shlex.quote(os.fspath(results))}"
    return command + (f" --sweep {shlex.quote(sweep)}" if sweep else "")


def sweep_command(sweep: str, df, results: str | os.PathLike, imports: Sequence[str] = ()) -> str:
    """The `testbed sweep` command that runs the agents (and agent seeds) of the rows `df`
    on `sweep` into `results`, with the user's `imports` (where their agents register):
    complete, so it runs as printed (without --agent it ran nothing)."""
    seeds = sorted({int(s) for s in df["agent_seed"]}) if "agent_seed" in df else [0]
    parts = ["testbed", "sweep", "--sweep", sweep, "--agent", ",".join(sorted(set(df["agent"])))]
    parts += ["--seeds", ",".join(map(str, seeds))] if seeds != [0] else []
    for spec in imports:
        parts += ["--import", spec]
    return shlex.join([*parts, "--results", os.fspath(results)])


def jobs(n: int) -> str:
    """'1 job' or 'n jobs'."""
    return "1 job" if n == 1 else f"{n} jobs"


def failures_note(board: Board) -> str | None:
    """One line saying how many of the counted jobs failed and how to see why (None when
    none failed): the rankings count a failed job as missing."""
    n = board.num_failed
    if not n or board.results is None:
        return None
    return f"{jobs(n)} failed (their reasons: {failures_command(board.results, board.sweep)})"


def missing_note(board: Board) -> str | None:
    """One line saying how many of the sweep's problems have no stored job at all (None
    without a sweep or when none is missing): tables ranked over observations show only
    what ran."""
    if board.problem_ids is None or board.sweep is None or board.results is None:
        return None
    ran = set(board.df["problem_id"])
    missing = [p for p in board.problem_ids if p not in ran]
    if not missing:
        return None
    return (
        f"{len(missing)} of sweep {board.sweep}'s {len(board.problem_ids)} problems have no "
        f"stored job yet (first: {missing[0]}); "
        f"{sweep_command(board.sweep, board.df, board.results, board.imports)} runs them"
    )


def coverage_notes(board: Board) -> list[str]:
    """The lines each family's rule says of what its tables leave out or rank apart
    (`Rule.coverage_notes`: e.g. configs that ran part of the ranked problems, scored
    apart), then `scope_notes`."""
    lines = []
    for family in board.families():
        rankings = [r for r in board.rankings if r.family == family]
        lines += rankings[0].rule.coverage_notes(board, rankings)
    return lines + scope_notes(board)


def scope_notes(board: Board) -> list[str]:
    """Without --sweep: one line per family whose shipped runs hold more of its problems
    than the ranking has (the README's job ranks 14 of classification_2d's 420), saying
    so and which sweep ranks over them all."""
    if board.sweep is not None or board.results is None:
        return []
    import generative

    lines = []
    for family in board.families():
        spec = next(r.spec for r in board.rankings if r.family == family)
        if spec.shipped is None or family not in board.clean:
            continue
        held = {p for p in shipped_runs.shipped(spec.shipped)["problem_id"]
                if p.split("/", 1)[0] == family}  # fmt: skip
        ranked = set(board.clean[family]["problem_id"])
        if len(held - ranked) == 0:
            continue
        sweeps = [(len(ids), name) for name in generative.family_sweeps().get(family, [])
                  if held <= set(ids := generative.sweep_ids(name))]  # fmt: skip
        where = f" (--sweep {max(sweeps)[1]} ranks over them all)" if sweeps else ""
        lines.append(
            f"{family}: ranked over the {len(ranked)} problems your results hold; our "
            f"shipped runs hold {len(held)}{where}."
        )
    return lines


def shipped_notes(board: Board) -> list[str]:
    """What the tables leave out of our shipped runs, a line each: the runs of jobs the
    user's results hold too (e.g. taken from the package; they count once, as the
    user's), and the families whose shipped source holds none of the ranked problems
    (else their tables show no shipped agent without saying why)."""
    lines = []
    if board.shipped_held:
        held = sorted(board.shipped_held.items())
        agents = ", ".join(f"{a} ({jobs(n)})" for a, n in held)
        lines.append(f"Our shipped runs of agent configs whose every job here your results "
                     f"also hold are shown once, as yours: {agents}.")  # fmt: skip
    tuned = shipped_runs.LABELS["tuned_references"][0].format(agent="")
    if any(str(a).endswith(tuned) for frame in board.clean.values() for a in frame["agent"]):
        lines.append(
            f"<agent>{tuned}: that agent's config chosen on one seed group of "
            "classification_2d (seed % 10 = 0) by experiments.tune_references and run on all "
            "its problems (and on the Neural Testbed figure's, by reproduce_neural_testbed "
            "--tuned); its score on the groups it was not chosen on is in "
            "docs/reproductions/tuned.md."
        )
    by_source: dict[str, list[str]] = {}
    for fam, source in board.shipped_none.items():
        by_source.setdefault(source, []).append(fam)
    for source, families in by_source.items():
        covered = shipped_runs.families(source)
        lines.append(
            f"Our shipped runs ({source}) hold none of the ranked problems of "
            f"{', '.join(families)}, so no shipped agent is shown there; they hold runs of "
            f"{', '.join(covered) or 'no problem yet'}."
        )
    return lines
