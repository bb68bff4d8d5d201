"""What a ranking table's headers mean: short names for the terminal and the report,
and one line of help per column shared by every rule (a rule's own columns are helped by
the rule: `Rule.column_help`)."""

from __future__ import annotations

from leaderboard.ranking.rules import help_of
from testbed.ranking import RankedBy

SHORT_NAMES = {  # terminal and report headers
    "rank": "rank",
    "label": "agent",
    "normalized_kl": "KL/norm",
    "normalized_stderr": "stderr",
    "mean_kl": "KL",
    "normalized_nll": "NLL/norm",
    "mean_nll": "NLL",
    "mean_test_acc": "test acc",
    "mean_test_ece": "test ECE",
    "median_train_seconds": "train s (median)",
    "median_evaluation_seconds": "eval s (median)",
    "pct_health": "health",
    "num_problems": "n",
    "num_non_finite": "non-finite",
    "mean_c2st": "C2ST",
    "ci_low": "CI low",
    "ci_high": "CI high",
    "num_observations": "obs",
    "paper_c2st": "paper C2ST",
    "paper_min": "paper min",
    "paper_max": "paper max",
    "paper_source": "paper",
    "observation": "obs",
    "c2st": "C2ST",
    "jobs": "jobs",
    "mean_train_seconds": "train s (mean)",
    "mean_evaluation_seconds": "eval s (mean)",
    "median_wall_seconds": "wall s (median)",
    "mean_wall_seconds": "wall s (mean)",
    "agent_seed": "seed",
    "coverage": "ran",
    "whose": "whose",
}
COMPILE_NOTE = (
    "the first jobs in each worker process also compile JAX code that later jobs reuse, "
    "which a mean carries and a median mostly does not"
)
MEDIAN_NOTE = "a median: robust to the first jobs' compilation in each worker"
MEAN_NOTE = "a mean: includes the first jobs' compilation in each worker"
HEALTH_HELP = (
    "share of the agent config's jobs (the family's problems it ran x its seeds) that gave a "
    "usable score; a missing seed or a failed job, a non-finite score, or a score below -1e-4 "
    "(negative beyond rounding) counts against it (the Neural Testbed's rule; 100% = all "
    "usable); a problem it never ran is coverage, shown apart, not health"
)
COLUMN_HELP = {  # what a header means: the report's tooltips and legends
    "rank": "position in this table: 1 = best (lowest score); ties share a rank",
    "label": "agent, with the config fields that differ between its configs",
    "agent": "agent name",
    "normalized_stderr": "standard error of the score (normalised, where the title says so) "
    "over problem-seed groups (seed % 10); 'n/a: 1 seed group' when the problems fall in "
    "fewer than two groups (a spread of one value is unknown, not 0)",
    "coverage": "problems the config ran of the table's (a table of configs that ran part "
    "of them: each scored over those it ran, not ranked with the configs that ran them all)",
    "whose": "yours: a run in your results file; shipped: our run shipped with the package; "
    "published: a paper's runs, over the same observations",
    "median_train_seconds": f"median seconds of training per job ({MEDIAN_NOTE}); problems "
    "that share their training data (tau pairs) train once: the first job of such a group "
    "holds the training time, the others 0",
    "median_evaluation_seconds": f"median seconds of scoring per job: the KL estimate and "
    f"accuracy on the test batches ({MEDIAN_NOTE})",
    "num_problems": "problems scored in this row (a failed job counts 1e6; a config that ran "
    "part of the table's problems is shown apart, scored over those it ran)",
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


TERMINAL_LEGEND = (  # the headers explained under the terminal's tables (the report: all)
    "rank",
    "normalized_*",
    "mean_*",
    "ci_low",
    "num_observations",
    "paper_*",
    "paper_min",
    "median_train_seconds",
    "median_evaluation_seconds",
    "num_non_finite",
    "pct_health",
    "num_problems",
    "coverage",
    "whose",
)


def column_help(column: str, spec: RankedBy | None = None) -> str:
    """What a header means: the family's rule's text, COLUMN_HELP's, or one made from the
    family's score."""
    own = help_of(column, spec)
    if own is not None:
        return own
    if column in COLUMN_HELP:
        return COLUMN_HELP[column]
    if spec is not None:
        better = "lower" if spec.lower_is_better else "higher"
        if column == f"normalized_{spec.short}":
            return (
                f"mean {spec.name} divided by the normalising agent's (named above the "
                f"table); {better} is better, 1 = as good as the normalising agent"
            )
        if column in (f"mean_{spec.short}", spec.short):
            return f"mean {spec.name} over the problems; {better} is better"
        if column == f"paper_{spec.short}":
            return f"the published {spec.name} ({spec.published}) at the same cell"
    return f"the {column} column"


def matches(column: str, pattern: str) -> bool:
    """`column` is `pattern`, or starts with it when it ends in `*`."""
    return column.startswith(pattern[:-1]) if pattern.endswith("*") else column == pattern
