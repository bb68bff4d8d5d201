"""`leaderboard.sweep`: agents over problems into a results store, every input checked once.

The library call under `testbed sweep`, the reproductions and the benchmarks:

    summary = leaderboard.sweep(["uniform", "beta_bernoulli"], ["coin/4", "coin/13"],
                                seeds="0-2", results="results.db", executor="inline")

`plan` checks the inputs and expands the jobs (no job runs, no file is written); `run`
runs jobs into a store, skipping the stored ones; `sweep` is the two in one. Every bad
input is an `InputError` naming its field, before anything runs.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leaderboard.execution.jobs import Job
from leaderboard.execution.runner import SweepSummary
from leaderboard.execution.seeds import AgentSeeds
from leaderboard.execution.timeouts import DEFAULT_TIMEOUT
from leaderboard.store import DEFAULT_PATH
from testbed.config import check_at_least
from testbed.errors import InputError, bad_value

MAX_JOBS = 1_000_000  # one sweep's jobs (each is held in memory while it is expanded)
EXECUTORS = ("local", "ray", "inline")

Seeds = str | int | Sequence[int]


@dataclasses.dataclass(frozen=True)
class UserModules:
    """The user's modules (`--import`), imported in this process by `import_modules`: their
    specs as workers import them (module names as given, `.py` paths made absolute). Given
    to `sweep`, `plan` or `make_executor` in place of specs, they are not imported again."""

    specs: tuple[str, ...] = ()


def sweep(
    agents: str | Sequence[str],
    problems: str | Sequence[str],
    *,
    seeds: Seeds = 0,
    configs: str = "default",
    overrides: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    results: str | os.PathLike = DEFAULT_PATH,
    executor: str | Any = "local",
    workers: int = 0,
    timeout: Any = DEFAULT_TIMEOUT,
    address: str | None = None,
    imports: Sequence[str] | UserModules = (),
    retry_failed: bool = False,
    share_training: bool = True,
    progress: bool = True,
) -> SweepSummary:
    """Runs every (agent config, problem, seed) not yet stored in `results`; returns what
    the sweep did (`SweepSummary`: `any_failed` says whether some job is stored as failed).

    `agents`: registered names; `problems`: problem ids, or the name of a registered sweep
    (a str, as `testbed sweep --sweep NAME`). `seeds`: agent seeds, `"0,1,2"`, `"0-4"`, an
    int or a list of ints. `configs`: each agent's `"default"` config or its whole `"sweep"`
    of configs; `overrides` set config fields of the agents that have them; `options` are
    problem options, as `generative.load(id, **options)` takes them. `executor`: `"local"`
    (a process pool of `workers`, 0: one per core), `"ray"` (the cluster at `address`, or a
    local Ray), `"inline"` (this process, one job at a time), or an executor object.
    `timeout`: seconds per job (None, 0 or inf: no limit). `imports`: modules or `.py`
    files that register the user's agents and problems, imported once here (the workers
    import them too), or the `UserModules` that `import_modules` imported.
    A failed job is stored with its reason and run again only with `retry_failed`;
    `share_training=False` trains once per job, not once per training set.

    Every input is checked before any job runs or any file is written: a bad one is an
    `InputError` naming its field (as `testbed sweep` says it). The settings in force at
    the call (`testbed.settings.current()`: the environment's, read once, when no entry
    point installed any) stay in force until it returns.
    """
    from testbed import settings

    with settings.using(settings.current()):  # read once: the settings of the whole call
        imported = import_modules(imports)
        jobs = plan(agents, problems, seeds=seeds, configs=configs, overrides=overrides,
                    options=options, imports=imported)  # fmt: skip
        runner = make_executor(executor, workers=workers, timeout=timeout, address=address,
                               imports=imported)  # fmt: skip
        return run(jobs, results, runner, retry_failed=retry_failed, progress=progress,
                   share_training=share_training)  # fmt: skip


def plan(
    agents: str | Sequence[str],
    problems: str | Sequence[str],
    *,
    imports: Sequence[str] | UserModules = (),  # first: what they register is checked after
    seeds: Seeds = 0,
    configs: str = "default",
    overrides: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Job]:
    """The jobs of a sweep (arguments as `sweep`'s), every input checked: no job runs.
    The checks run in the order the command line's errors come: modules, seeds, problems,
    the sweep's size, problem options, then agents and their overrides (`jobs.expand`)."""
    import agents as registry
    import generative
    from leaderboard.execution.jobs import expand

    import_modules(imports)
    names = [agents] if isinstance(agents, str) else list(agents)
    parsed = AgentSeeds.parse(seeds)  # once: counted, then expanded, then passed on
    seed_count = parsed.counted()
    if isinstance(problems, str):  # a registered sweep's name
        ids = list(generative.sweep_ids(problems))
    else:  # ids, each checked: an unknown id or family is refused before any job is made
        ids = list(problems)
        for pid in ids:
            generative.problem_settings(pid)
    # its size, before any job is made (`--seeds 0-10000000` would grow to gigabytes)
    per_agent = [len(registry.sweep(n)) if configs == "sweep" else 1 for n in names]
    if (total := sum(per_agent) * len(ids) * seed_count) > MAX_JOBS:
        raise InputError(
            f"sweep: got {total:,} jobs ({sum(per_agent):,} agent configs x {len(ids):,} "
            f"problems x {seed_count:,} seeds); allowed: at most {MAX_JOBS:,} jobs in one "
            "sweep (fewer --seeds, problems or configs; several sweeps may share one --results "
            "file)"
        )
    parsed.values()  # the seeds themselves are checked before the options
    typed = check_options(ids, options or {})
    return expand(names, ids, seeds=parsed, overrides=overrides, configs=configs,
                  problem_options=typed)  # fmt: skip


def run(
    jobs: Sequence[Job],
    results: str | os.PathLike,
    executor: Any,
    *,
    retry_failed: bool = False,
    progress: bool = True,
    share_training: bool = True,
) -> SweepSummary:
    """Runs `jobs` on `executor` into the results store `results` (made if new; stored
    jobs are skipped). An executor that connects (Ray) connects before the store is
    opened, so a cluster that does not answer leaves no file behind; it is closed after.
    The settings in force when it starts (`testbed.settings.current()`, read once) stay in
    force for the whole sweep: its progress, its checkpoints, every worker's."""
    from leaderboard.execution.runner import run_sweep
    from leaderboard.store import ResultsStore
    from testbed import settings

    connect = getattr(executor, "connect", None)
    with settings.using(settings.current()):
        if connect is not None:
            connect()
        try:
            with ResultsStore(results, mode="w") as store:
                return run_sweep(jobs, store, executor, retry_failed=retry_failed,
                                 progress=progress, share_training=share_training)  # fmt: skip
        finally:
            close = getattr(executor, "close", None)
            if close is not None:
                close()


def make_executor(
    kind: str | Any = "local",
    *,
    workers: int = 0,
    timeout: Any = DEFAULT_TIMEOUT,
    address: str | None = None,
    imports: Sequence[str] | UserModules = (),
) -> Any:
    """The executor `kind` names (`local`, `ray`, `inline`) with its settings checked; an
    executor object is taken as it is (its settings are its own: none may be given).
    `imports` are what the workers import (`UserModules`: imported in this process already,
    so the inline executor, which runs here, imports nothing again)."""
    from leaderboard.execution.executors import InlineExecutor, LocalExecutor, RayExecutor

    here = isinstance(imports, UserModules)
    imports = imports.specs if here else tuple(imports)
    if not isinstance(kind, str):
        given = {"workers": workers, "address": address, "imports": imports}
        given = {k: v for k, v in given.items() if v} | (
            {"timeout": timeout} if timeout != DEFAULT_TIMEOUT else {}
        )
        if given:
            name = next(iter(given))
            raise InputError(
                f"{name}: got {given[name]!r} beside an executor object; allowed: the "
                "executor's own settings (or an executor named by a string)"
            )
        return kind
    if kind not in EXECUTORS:
        raise bad_value("executor", kind, EXECUTORS)
    check_at_least("workers", workers, 0)  # a number first, whichever executor it is for
    if kind == "inline":
        executor = InlineExecutor(imports=() if here else imports, timeout=timeout)
    elif kind == "ray":
        executor = RayExecutor(address=address, timeout=timeout, workers=workers, imports=imports)
    else:
        executor = LocalExecutor(workers=workers, timeout=timeout, imports=imports)
    if kind == "inline" and workers:
        raise InputError(
            f"workers: got {workers} with --executor inline, which runs one job at a time "
            "in this process; allowed: --executor local or ray for parallel workers"
        )
    return executor


def import_modules(specs: Sequence[str] | UserModules) -> UserModules:
    """Imports the user's modules `specs` (their agents and problems register there):
    module names as given, `.py` paths made absolute (as workers import them). One that
    cannot be imported is one InputError saying why and where. Returns them imported
    (`UserModules`, which `sweep`, `plan` and `make_executor` take as they are); given
    `UserModules`, imports nothing again."""
    from leaderboard.execution.worker import import_user_module

    if isinstance(specs, UserModules):
        return specs
    resolved = tuple(_resolved(spec) for spec in specs)
    for spec in resolved:
        try:
            import_user_module(spec)
        except InputError as e:  # e.g. an agent name registered twice: said as it is
            raise InputError(f"--import {spec}: {e}") from None
        except ImportError as e:
            raise InputError(
                f"--import: got {spec!r}; cannot import it ({e}); allowed: a module name "
                "(importable from here) or a path to a .py file"
            ) from None
        except Exception as e:  # the user's module raised: where, in one line
            raise InputError(
                f"--import: {spec!r} raised {type(e).__name__}: {e} ({_where_raised(e)}); "
                f"allowed: a module that imports without error (python {spec} shows the "
                "traceback)"
            ) from None
    return UserModules(resolved)


def _resolved(spec: str) -> str:
    """A module name as it is; a `.py` path (or one with a folder) made absolute."""
    is_path = spec.endswith(".py") or os.sep in spec
    return str(Path(spec).expanduser().resolve()) if is_path else spec


def _where_raised(e: BaseException) -> str:
    """'file:line' where `e` was raised (a SyntaxError: where the bad code is)."""
    import traceback

    if isinstance(e, SyntaxError) and e.filename:
        return f"{e.filename}:{e.lineno}"
    frames = traceback.extract_tb(e.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "unknown place"


def count_seeds(seeds: Seeds) -> int:
    """How many seeds `seeds` names (ranges counted, not expanded, so a huge one is refused
    by its size); an InputError for a range that runs backwards (`5-2` names no seed)."""
    return AgentSeeds.parse(seeds).counted()


def check_options(problem_ids: Sequence[str], options: Mapping[str, Any]) -> dict[str, Any]:
    """Problem options checked as `generative.load(id, **options)` checks them, for every
    family among `problem_ids` (an unknown name, a value of the wrong type or out of range
    is one InputError), without building a problem; returns them typed
    (`num_test_seeds="50"` -> 50), as the first family types them."""
    from generative.registry import split_id, typed_options
    from testbed.registry import unknown_name

    if not options:
        return {}
    typed_first: dict[str, Any] | None = None
    seen: set[str] = set()
    for pid in problem_ids:
        family, rest = split_id(pid)
        if family.name in seen:
            continue
        seen.add(family.name)
        unknown = sorted(set(options) - set(family.options))
        if unknown and not family.options:
            raise InputError(
                f"--option: got {unknown[0]!r} for {pid}; allowed: none ({family.name} "
                "problems take no options)"
            )
        where = f"--option for {family.name} problems"
        if unknown:
            raise unknown_name(where, unknown[0], family.options)
        typed = typed_options(family, dict(options), where)
        _check_values(family, rest, typed, where)
        typed_first = typed if typed_first is None else typed_first
    return typed_first or {}


def _check_values(family: Any, rest: str, typed: dict[str, Any], where: str) -> None:
    """The family's settings class checks the options' values (ranges, choices) as its
    problem would, when it is a dataclass and the settings are all its fields."""
    from generative.registry import problem_type_of

    cls = family.option_types or problem_type_of(family)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return
    names = {f.name for f in dataclasses.fields(cls)}
    fields = {k: v for k, v in {**family.settings(rest), **typed}.items() if k in names}
    try:
        cls(**fields)
    except TypeError:  # settings that are not all its fields: types checked only
        pass
    except InputError as e:
        raise InputError(f"{where}: {e}") from None


def run_one(
    agent: str,
    problem_id: str,
    *,
    seed: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    metrics: Sequence[str] | None = None,
) -> tuple[Any, dict[str, Any], Any]:
    """One agent on one problem in this process, nothing stored (`testbed run`): the
    configured agent, the problem options typed, and the `Quality`. `metrics` replace the
    problem's own (`"default"` among them: its own too). The inputs are checked as
    `sweep` checks them; a run out of memory or out of range is an InputError naming the
    overrides."""
    import agents
    import generative
    import testbed
    from testbed.evaluate import check_fit
    from testbed.progress import activity

    config = dict(overrides or {}) | ({} if seed is None else {"seed": seed})
    loaded = agents.load(agent, **config)
    typed = check_options([problem_id], options or {})
    problem = generative.load(problem_id, **typed)
    check_fit(loaded, problem, problem_id)  # the id in the message, before training
    if metrics and "default" in metrics:  # the problem's own metrics, plus the others named
        defaults = list(getattr(problem, "metrics", ()))
        metrics = list(
            dict.fromkeys(m for n in metrics for m in (defaults if n == "default" else [n]))
        )
    # warnings wait for the outcome: a size past 32 bits makes JAX warn of truncation
    # before its OverflowError, which ends in one line; every other ending says them
    said: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as said:
            with activity(f"{loaded.name} on {problem_id}", timed=False):
                return loaded, typed, testbed.evaluate(loaded, problem, metrics=metrics)
    except (MemoryError, OverflowError, RuntimeError) as e:  # JAX's out of memory: Runtime
        if isinstance(e, RuntimeError) and "RESOURCE_EXHAUSTED" not in str(e):
            raise
        said.clear()
        given = " ".join(f"--set {k}={v}" for k, v in (overrides or {}).items())
        what = "met a number too large" if isinstance(e, OverflowError) else "ran out of memory"
        raise InputError(
            f"{loaded.name} on {problem_id} {what} with {given or 'its default config'} "
            f"({str(e).splitlines()[0][:160]}); allowed: sizes that fit in this machine's "
            "memory"
        ) from None
    finally:
        for w in said:  # said once the recording ended (inside it they are recorded again)
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
