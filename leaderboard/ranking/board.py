"""The leaderboard: a results frame -> the ranking tables of every family present.

Each problem family declares how it is ranked (`testbed.ranking.RankedBy`, given when it
registers): the metric, the rule (`leaderboard.ranking.rules`: the Neural Testbed's, the
SBI benchmark's per cell over observations, or a family's own) and the rule's settings.
Families are never pooled: each rule ranks its families, and the board loops over the
rules present; the tables' columns, titles and legend lines are the rules'. Nothing here
names a family, a rule, a score or a rule's column. Ranking reads DataFrames: loading a
results file is `leaderboard.build`'s (`leaderboard.load_and_rank`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

import pandas as pd

from leaderboard.ranking import rules, scoring
from leaderboard.ranking import shipped as shipped_runs
from leaderboard.ranking.legend import COLUMN_HELP, SHORT_NAMES, column_help, header, matches
from leaderboard.ranking.notes import (
    coverage_notes,
    failures_command,
    failures_note,
    missing_note,
    scope_notes,
    shipped_notes,
    sweep_command,
)
from leaderboard.ranking.rules import Rule, Scope, rule_of
from leaderboard.ranking.standings import SHIPPED_SUFFIX, Board, Ranking, whose
from testbed.errors import InputError, bad_value
from testbed.ranking import RankedBy

__all__ = [  # the ranking's public names, wherever they are defined
    "COLUMN_HELP", "SHORT_NAMES", "SHIPPED_SUFFIX", "Board", "Ranking", "column_help",
    "coverage_notes", "failures_command", "failures_note", "legend", "missing_note",
    "partial_title", "problem_universe", "rank", "runtimes", "scope_notes",
    "shipped_notes", "shown_columns", "sweep_command", "tables", "title", "whose",
]  # fmt: skip


def problem_universe(sweep: str | None) -> list[str] | None:
    """The problem ids of `sweep` (None: whatever problems the results hold)."""
    if sweep is None:
        return None
    import generative

    return generative.sweep_ids(sweep)


def _check_rows(df: pd.DataFrame, results, sweep: str | None, ids: list[str] | None,
                imports: Sequence[str] = ()):  # fmt: skip
    """The rows of `df` that count (the sweep's problems); refused when there are none,
    naming the commands that run the sweep's jobs and that rank our shipped runs of it."""
    if not len(df):
        raise InputError(f"results: {str(results)!r} holds no finished jobs yet")
    if ids is not None:
        held, df = df, df[df["problem_id"].isin(set(ids))].reset_index(drop=True)
        if not len(df):
            raise InputError(
                f"results: {str(results)!r} holds no jobs of sweep {sweep!r} yet; allowed: a "
                f"sweep with stored jobs ({_runs_sweep(held, results, sweep, ids, imports)}"
                f"{_ranks_ours(sweep, ids)})"
            )
    return df


def _ranks_ours(sweep: str, ids: list[str]) -> str:
    """'; <the --shipped-only command> ranks ...' when the package ships runs of `sweep`'s
    problems, else ''."""
    try:
        _shipped_only(sweep, ids, True)
    except InputError:
        return ""
    ours = shlex.join(["testbed", "leaderboard", "--sweep", sweep, "--shipped-only"])
    return f"; {ours} ranks our shipped runs of it, no results file read"


def _runs_sweep(held: pd.DataFrame, results, sweep: str, ids: list[str], imports) -> str:
    """The command that runs `sweep` with the agents (and seeds) of the rows `held` that
    fit its problems (or are not registered here: what they fit is unknown); when none
    fits, with the first registered agent that does."""
    import agents
    from leaderboard.agent_fit import fitting

    names = set(held["agent"])
    keep = fitting(sorted(names), ids) + [n for n in names if n not in agents.AGENTS]
    mine = held[held["agent"].isin(keep)]
    if len(mine):
        return f"{sweep_command(sweep, mine, results, imports)} runs it"
    fits = fitting(agents.AGENTS.names(), ids)
    if not fits:
        return f"no agent registered here fits sweep {sweep}"
    first = pd.DataFrame({"agent": fits[:1], "agent_seed": [0]})
    return (
        f"{sweep_command(sweep, first, results, imports)} runs it, as does any agent that "
        f"fits it in place of {fits[0]}: {', '.join(fits)}"
    )


def _declared_rules() -> list[Rule]:
    """The registered rules, and each rule a registered family declares as an object of
    its own."""
    import generative

    families = (generative.FAMILIES.get(name) for name in generative.FAMILIES)
    declared = [f.ranked_by for f in families if f.ranked_by is not None]
    own = [rule_of(spec) for spec in declared if isinstance(spec.rule, rules.Rule)]
    return list(dict.fromkeys([*rules.RULES.values(), *own]))


def _check_args(metric: str, only: dict) -> dict:
    """`metric` is a rule's (or 'auto'); each key of `only` names the tables of a rule
    (`Rule.part_name`) and its value is one (None: every one): the keys asked for."""
    declared = _declared_rules()
    allowed = list(dict.fromkeys(["auto", *(rule.metric for rule in declared)]))
    if metric not in allowed:
        raise bad_value("metric", metric, allowed)
    parts = {rule.part_name: rule for rule in declared if rule.part_name}
    for name in only:
        if name not in parts:
            raise TypeError(f"rank() got an unexpected keyword argument {name!r}")
    for name, value in only.items():
        if value is not None:
            parts[name].check_part(value)
    return {name: value for name, value in only.items() if value is not None}


def rank(
    df: pd.DataFrame | None,
    *,
    results: str | os.PathLike | None = None,
    sweep: str | None = None,
    normalize: str | None = "default",
    best_only: bool = True,
    metric: str = "auto",
    per_observation: bool = False,
    unranked_ok: bool = False,
    shipped: bool = True,
    imports: Sequence[str] = (),
    **only: object,
) -> Board:
    """Ranks the rows `df` (from the results file `results`, named in messages) as each
    family present declares (`RankedBy`): each rule present ranks its families (the
    Neural Testbed's a table per family and part, `Rule.part_name`; the SBI benchmark's
    per cell over observations with the published results the family names beside ours,
    per observation too with `per_observation`).

    `normalize`: 'default' (each family's own normaliser), an agent name, or None /
    'none'. `metric` (a rule's `Rule.metric`) keeps only that rule's tables. With
    `sweep`, only the sweep's problems count. Each ranking gets a `rank` column (1 =
    best; ties share one). With `unranked_ok`, results with nothing to rank give a board
    without rankings instead of an error. With `shipped` (default), our shipped runs of
    the same problems that a family names (`RankedBy.shipped`) are ranked beside the
    user's, labelled `<agent> (ours, shipped)`; `Board.df` holds the user's rows only.
    `df=None` ranks our shipped runs of the sweep's problems alone (`sweep` required):
    where the reference agents stand. `imports`: the user's modules (`--import`), named
    in the commands the notes and errors suggest. `only`: a keyword a rule names its
    tables' key by (`Rule.part_name`, e.g. the Neural Testbed's), keeping only that key's
    tables of the rule (None: every key)."""
    only = _check_args(metric, only)
    ids = problem_universe(sweep)
    published = shipped  # the published rows beside, as our shipped ones (--no-shipped: none)
    if df is None:
        df, shipped = _shipped_only(sweep, ids, shipped), False
    else:
        df = _check_rows(df, results, sweep, ids, imports)
    specs = _of_metric(scoring.ranked_by(sorted(set(scoring.family_of(df["problem_id"])))),
                       metric, df, results, sweep)  # fmt: skip
    ranked, held, none = _with_shipped(df, specs, ids) if shipped else (df, {}, {})
    scope = Scope(ids, only, normalize, best_only, per_observation, published,
                  scoring.entry_labels(ranked))  # fmt: skip
    rankings, clean, per_obs, parts = [], {}, {}, {}
    for rule, theirs in rules.by_rule(specs):
        made = rule.rank(ranked, theirs, scope)
        rankings += made.rankings
        clean.update(made.clean)
        per_obs.update(made.per_observation)
        parts.setdefault(rule.part_name, set()).update(made.parts)
    for name, value in only.items():
        if parts.get(name) and not any(r.part == value and r.rule.part_name == name
                                       for r in rankings):  # fmt: skip
            raise bad_value(name, value, sorted(parts[name]))
    if normalize not in (None, "default", "none") and not any(r.rule.normalised for r in rankings):
        raise InputError(
            f"normalize: got {normalize!r}, but these results have no ranking to normalise "
            "(scores ranked over observations are not normalised); allowed: the default, or none"
        )
    if not rankings and not unranked_ok:
        raise _nothing_to_rank(df, results, sweep)
    order = {f: i for i, f in enumerate(_registration_order())}
    rankings.sort(key=lambda r: order.get(r.family, len(order)))  # stable: a rule's order
    ranked_families = {r.family for r in rankings}
    none = {f: source for f, source in none.items() if f in ranked_families}
    path = None if results is None else os.fspath(results)
    return Board(df, ids, rankings, clean, path, per_obs, sweep, held, none, tuple(imports))


def _of_metric(specs: dict[str, RankedBy], metric: str, df: pd.DataFrame, results,
               sweep: str | None) -> dict[str, RankedBy]:  # fmt: skip
    """The families of `specs` ranked by the rule of `metric` ('auto': all of them)."""
    if metric == "auto":
        return specs
    specs = {f: spec for f, spec in specs.items() if rule_of(spec).metric == metric}
    if not specs or not any(spec.score in df for spec in specs.values()):
        whose = f"results: {str(results)!r}" if results is not None else (
            f"--shipped-only: our shipped runs of sweep {sweep!r}"
        )  # fmt: skip
        raise InputError(
            f"{whose} has no family ranked by --metric {metric}; "
            "allowed: --metric auto, or results of such problems"
        )
    return specs


def _shipped_only(sweep: str | None, ids: list[str] | None, shipped: bool) -> pd.DataFrame:
    """Our shipped runs of `sweep`'s problems, labelled as ours, as the rows to rank."""
    if not shipped:
        raise InputError(
            "shipped: ranking the shipped runs alone needs them; allowed: results of yours "
            "with --no-shipped, or the shipped runs without it"
        )
    if sweep is None or ids is None:
        raise InputError(
            "sweep: the shipped runs alone are ranked over a sweep's problems, and none was "
            "given; allowed: a sweep, e.g. classification_2d"
        )
    specs = scoring.ranked_by(sorted({i.split("/", 1)[0] for i in ids}))
    sources = {spec.shipped for spec in specs.values() if spec.shipped is not None}
    parts = [
        shipped_runs.beside(spec.shipped, [i for i in ids if i.startswith(f"{fam}/")])
        for fam, spec in specs.items()
        if spec.shipped is not None
    ]
    parts = [p for p in parts if len(p)]
    if not parts:
        held = {f for source in sources for f in shipped_runs.families(source)}
        raise InputError(
            f"sweep: the package ships no runs of the problems of sweep {sweep!r}; allowed: a "
            f"sweep of problems of {', '.join(sorted(held)) or 'a family with shipped runs'}"
        )
    return pd.concat(parts, ignore_index=True)


def _with_shipped(
    df: pd.DataFrame, specs: dict[str, RankedBy], ids: Sequence[str] | None
) -> tuple[pd.DataFrame, dict[str, int], dict[str, str]]:
    """`df` and, for each family that names shipped runs of ours, those of its problems
    in the sweep (`ids`) or, without a sweep, in `df`; how many shipped jobs of each
    agent were left out because `df` holds every job of their config there (shown once,
    as the user's); and the families whose source holds none of those problems."""
    family = scoring.family_of(df["problem_id"])
    parts = [df]
    held: dict[str, int] = {}
    none: dict[str, str] = {}
    for fam, spec in specs.items():
        if spec.shipped is None:
            continue
        if ids is not None:
            wanted = [i for i in ids if i.split("/", 1)[0] == fam]
        else:
            wanted = list(dict.fromkeys(df.loc[family == fam, "problem_id"]))
        if wanted:
            parts.append(shipped_runs.beside(spec.shipped, wanted, held=df["key"]))
            same = shipped_runs.shipped(spec.shipped)  # the family's own problems only
            same = same[same["problem_id"].isin(set(wanted))]
            if not len(same):
                none[fam] = spec.shipped
            same = same[shipped_runs.wholly_held(same, df["key"])]
            for agent, n in same["agent"].value_counts().items():
                held[agent] = held.get(agent, 0) + int(n)
    parts = [p for p in parts if len(p)]
    return (pd.concat(parts, ignore_index=True) if len(parts) > 1 else df), held, none


def _registration_order() -> list[str]:
    import generative

    return list(generative.FAMILIES)


def _nothing_to_rank(df: pd.DataFrame, results, sweep: str | None) -> InputError:
    import generative

    unknown = sorted(set(scoring.family_of(df["problem_id"])) - set(generative.FAMILIES))
    if unknown:
        return InputError(
            f"results: {str(results)!r} holds problems of {', '.join(unknown)}, not registered "
            "here, so how to rank them is unknown; allowed: --import the module that "
            "registers them (as the sweep did)"
        )
    failed = int((df["status"] == "failed").sum())
    if failed == len(df):
        where = f"{str(results)!r}" + (f" (sweep {sweep})" if sweep else "")
        return InputError(
            f"results: all {failed} jobs in {where} failed, so there is nothing to rank; "
            f"allowed: results with finished jobs ({failures_command(results, sweep)} lists "
            "the failures and their reasons)"
        )
    return InputError(
        f"results: {str(results)!r} has no score its families are ranked on; allowed: "
        "results of ranked families (testbed list problems; a family registered with "
        "ranked_by=None keeps its scores in its rows: leaderboard.load)"
    )


def title(board: Board, ranking: Ranking) -> str:
    """A ranking table's title, as its rule says it: what it scores, its family when
    several families share a section, and what else the rule says (e.g. its part and
    normaliser)."""
    shared = next(rs for s, rs in board.sections() if s.name == ranking.spec.name)
    return ranking.rule.title(ranking, len({r.family for r in shared}) > 1)


def shown_columns(spec: RankedBy) -> list[str]:
    """The columns a ranking table of `spec` shows (its rule's)."""
    return rule_of(spec).columns(spec)


def partial_title(board: Board, ranking: Ranking) -> str:
    """The title of a ranking's table of configs that ran part of its problems."""
    return ranking.rule.partial_title(title(board, ranking), ranking)


def _part_columns(board: Board) -> list[str]:
    """The columns that say a table's part in csv/json rows (one per rule that names its
    tables' key, registered or present), so that the rows of every table line up."""
    present = [r.rule for r in board.rankings]
    return list(dict.fromkeys(r.part_name for r in [*rules.RULES.values(), *present]
                              if r.part_name))  # fmt: skip


def _full(table: pd.DataFrame, ranking: Ranking, parts: list[str]) -> pd.DataFrame:
    """A table with every column, its family and part as fields, and whose rows they are."""
    said = {p: ranking.part if ranking.rule.part_name == p else None for p in parts}
    shown = table.assign(family=ranking.family, **said)
    if "label" in shown:
        shown["whose"] = whose(shown["label"]).to_numpy()
    return shown


def tables(board: Board, full: bool = False) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) pairs for display, as each table's rule shows it; `full` keeps every
    column and adds the table's family and part (csv/json output)."""
    out = []
    parts = _part_columns(board)
    for ranking in board.rankings:
        titled = [(title(board, ranking), ranking.table, False)]
        if len(ranking.partial):
            titled.append((partial_title(board, ranking), ranking.partial, True))
        for said, table, apart in titled:
            if full:
                shown = _full(table, ranking, parts)
            else:
                shown = _display(ranking.rule.shown(table, ranking, apart))
            shown.attrs["spec"] = ranking.spec
            out.append((said, shown))
    for fam, runs in board.per_observation.items():
        spec = next(r.spec for r in board.rankings if r.family == fam)
        rule = rule_of(spec)
        cols = rule.per_observation_columns(spec)
        shown = runs if full else runs[[c for c in cols if c in runs.columns]]
        shown.attrs["spec"] = spec
        out.append((rule.per_observation_title(spec, fam), shown))
    return out


def _display(shown: pd.DataFrame) -> pd.DataFrame:
    """A table as shown: `whose` beside the agent when the table mixes the user's rows with
    our shipped ones."""
    shown = shown.copy()
    if "label" in shown and len(set(whose(shown["label"]))) > 1:
        shown.insert(list(shown.columns).index("label") + 1, "whose", whose(shown["label"]))
    return shown


def legend(board: Board) -> list[str]:
    """What the shown tables' less obvious headers mean, one line each (printed under the
    terminal's tables): the columns each table's rule explains (`Rule.legend_patterns`)."""
    lines = ["Lower is better for every ranked score unless its legend says otherwise; "
             "rank 1 is the best."]  # fmt: skip
    seen: set[str] = set()
    specs = {r.family: r.spec for r in board.rankings}
    for _, table in tables(board):
        spec = table.attrs.get("spec") or next(iter(specs.values()), None)
        patterns = rule_of(spec).legend_patterns(spec) if spec is not None else ()
        for pattern in patterns:
            for column in table.columns:
                if column not in seen and matches(column, pattern):
                    seen.add(column)
                    name = rule_of(spec).legend_name(column, spec) or header(column, spec)
                    lines.append(f"{name}: {column_help(column, spec)}")
    return lines + shipped_notes(board)


def runtimes(df: pd.DataFrame) -> pd.DataFrame:
    """Per agent config over its finished jobs: jobs, then the median and the mean train,
    evaluation and wall seconds per job (the first jobs in a worker also compile, which
    the mean includes: the median is the typical job). A training shared by several
    problems counts once in the training seconds (its other jobs record 0 s)."""
    ok = df[df["status"] == "ok"]
    labels = scoring.entry_labels(df)
    columns = ["agent", "config_key", "label", "jobs"]
    metrics = [m for m in ("train_seconds", "evaluation_seconds", "wall_seconds") if m in ok]
    for m in metrics:
        columns += [f"median_{m}", f"mean_{m}"]
    rows = []
    for (agent, ckey), g in ok.groupby(scoring.ENTRY, sort=True):
        row = {"agent": agent, "config_key": ckey, "label": labels[ckey], "jobs": len(g)}
        for m in metrics:
            values = g[m].astype(float)
            if m == "train_seconds" and "shared_training" in g:  # each training once
                values = values[~((g["shared_training"].fillna(1) > 1) & (values == 0))]
            row[f"median_{m}"], row[f"mean_{m}"] = float(values.median()), float(values.mean())
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)
