"""What a ranking table's headers mean: short names for the terminal and the report, and
one line of help per column no rule owns (the rank, the agent, whose row it is, the
runtimes, a stored job's fields). A rule's own columns are named and helped by the rule
(`Rule.short_names`, `Rule.help`); the legends assemble what the rules present say."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from leaderboard.ranking.rules import RULES, rule_of, said_by_rules
from testbed.ranking import RankedBy

HEADERS = {  # terminal and report headers of the columns no rule owns
    "rank": "rank",
    "label": "agent",
    "median_train_seconds": "train s (median)",
    "median_evaluation_seconds": "eval s (median)",
    "jobs": "jobs",
    "mean_train_seconds": "train s (mean)",
    "mean_evaluation_seconds": "eval s (mean)",
    "median_wall_seconds": "wall s (median)",
    "mean_wall_seconds": "wall s (mean)",
    "agent_seed": "seed",
    "coverage": "ran",
    "whose": "whose",
}


class _Headers(Mapping):
    """Every header a table may show: `HEADERS`, then each registered rule's own (for a
    caller with no table's rule at hand, e.g. the terminal's table)."""

    def _merged(self) -> dict[str, str]:
        merged: dict[str, str] = {}
        for rule in RULES.values():
            merged = {**rule.short_names, **merged}
        return {**merged, **HEADERS}

    def __getitem__(self, column: str) -> str:
        return self._merged()[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())


SHORT_NAMES: Mapping[str, str] = _Headers()
COMPILE_NOTE = (
    "the first jobs in each worker process also compile JAX code that later jobs reuse, "
    "which a mean carries and a median mostly does not"
)
MEDIAN_NOTE = "a median: robust to the first jobs' compilation in each worker"
MEAN_NOTE = "a mean: includes the first jobs' compilation in each worker"
COLUMN_HELP = {  # what a header no rule owns means: the report's tooltips and legends
    "rank": "position in this table: 1 = best (lowest score); ties share a rank",
    "label": "agent, with the config fields that differ between its configs",
    "agent": "agent name",
    "coverage": "problems the config ran of the table's (a table of configs that ran part "
    "of them: each scored over those it ran, not ranked with the configs that ran them all)",
    "whose": "yours: a run in your results file; shipped: our run shipped with the package; "
    "published: a paper's runs, over the same observations",
    "jobs": "finished (ok) jobs",
    "mean_train_seconds": f"mean seconds of training per job ({MEAN_NOTE})",
    "mean_evaluation_seconds": f"mean seconds of scoring per job ({MEAN_NOTE})",
    "median_wall_seconds": f"median seconds per job, start to stored result ({MEDIAN_NOTE})",
    "mean_wall_seconds": f"mean seconds per job, start to stored result ({MEAN_NOTE})",
    "key": "the job's key: a hash of agent, config, problem id and seed",
    "config_key": "a hash of the agent and its config",
    "config": "the agent's config (JSON)",
    "problem_id": "problem id",
    "family": "problem family: the part of the problem id before its first '/'",
    "agent_seed": "the job's seed",
    "error": "the stored reason, in one line",
    "traceback": "the end of the Python traceback (none for a timeout or a dead worker)",
    "attempts": "times the job ran (--retry-failed runs a failed job again)",
    "finished_at": "when the job's result was stored (UTC)",
}


def _runtime_help(column: str) -> str | None:
    """The help of the median runtimes, with what the rules say of their problems' training
    and evaluation (`Rule.shared_training`, `Rule.evaluation`)."""
    if column == "median_train_seconds":
        shared = said_by_rules("shared_training")
        return (
            f"median seconds of one training ({MEDIAN_NOTE}); problems that share their "
            f"training data{f' ({shared})' if shared else ''} train once, counted once "
            "whichever problem holds it"
        )
    if column == "median_evaluation_seconds":
        evaluation = said_by_rules("evaluation")
        return (
            f"median seconds of scoring per job{f': {evaluation}' if evaluation else ''} "
            f"({MEDIAN_NOTE})"
        )
    return None


def runtime_note() -> str:
    """What the runtimes' seconds are (the report says it above them)."""
    shared = said_by_rules("shared_training")
    return (
        "Seconds per finished job, medians beside means: " + COMPILE_NOTE + "; a training "
        f"shared by several problems{f' ({shared})' if shared else ''} counts once in the "
        "training seconds."
    )


def column_help(column: str, spec: RankedBy | None = None) -> str:
    """What a header means: the family's rule's text (`Rule.help`), COLUMN_HELP's, or the
    column's name."""
    own = None if spec is None else rule_of(spec).help(column, spec)
    if own is not None:
        return own
    return COLUMN_HELP.get(column) or _runtime_help(column) or f"the {column} column"


def header(column: str, spec: RankedBy | None = None) -> str:
    """A column's short header: the family's rule's, else the shared one, else its name."""
    own = None if spec is None else rule_of(spec).header(column)
    return own if own is not None else SHORT_NAMES.get(column, str(column))


def matches(column: str, pattern: str) -> bool:
    """`column` is `pattern`, or starts with it when it ends in `*`."""
    return column.startswith(pattern[:-1]) if pattern.endswith("*") else column == pattern
