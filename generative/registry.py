"""The problem registry: problem families (id -> settings -> Problem) and named sweeps.

A problem id is `family/rest` (`classification_2d/75`, `sbi/two_moons/10000/1`). A family
maps `rest` to a settings dict (plain values, joined onto leaderboard rows) and builds a
seeded problem from the settings. A sweep is a named, ordered list of problem ids.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from testbed import threefry_cpu
from testbed.base import PREDICTIONS, SHARED_BY, SHARED_BY_AMORTIZED, Problem
from testbed.config import coerce_fields, field_types
from testbed.errors import InputError, bad_value
from testbed.names import malformed_problem_id
from testbed.ranking import JOINT_KL, RankedBy
from testbed.registry import Registry, unknown_name


@dataclasses.dataclass(frozen=True)
class ProblemFamily:
    """`settings(rest) -> dict` (raises InputError for an unknown rest), `build(settings)`.

    `options` names the settings a user may change when loading an id (evaluation sizes,
    optional metrics); the id still names the problem (data, environment, seed).
    `training_key(settings)`, where given, names the training data: problems with one key
    give the same training data. `training_shared_by` says which agents may then train
    once for them all: 'amortized' (they differ in what the agent is shown, e.g. the SBI
    benchmark's observations of one budget) or 'any' (they differ only in how they score,
    e.g. the Neural Testbed's tau pairs); see `testbed.base.SharesTraining`.
    `require_data(list of settings)`, where given, raises one InputError naming the data
    those problems need that is not at hand (a dataset not prepared, a missing file): a
    sweep calls it before its first job.
    `id_form` says how its ids are written (`sbi/<task>/<num_simulations>/<k>[/seeded]`),
    for `testbed list problems`.
    `ranked_by` is how the leaderboard ranks its problems (`testbed.ranking.RankedBy`; the
    Neural Testbed's joint KL unless the family says otherwise; None: not ranked).
    `data_version(settings)`, where given, names the version of the data a problem reads
    (a file's sha256): a stored result of other data is refused rather than reused.
    `prediction` is what its problems need an agent to predict (a name of
    `testbed.base.PREDICTIONS`: `labels`, `real_values`, `posterior`, `model_posterior`), so
    a sweep refuses an agent that predicts another kind before any job, without loading a
    problem (`leaderboard.execution.jobs.check_fit`); None: not declared, not checked
    (evaluate still checks each problem as it runs).
    `problem_type` is the class `build` returns (default: its return annotation), so what
    its problems offer an oracle is known without building one (`problem_type_of`).
    """

    name: str
    settings: Callable[[str], dict[str, Any]]
    build: Callable[[dict[str, Any]], Problem]
    description: str = ""
    options: tuple[str, ...] = ()
    training_key: Callable[[dict[str, Any]], str] | None = None
    require_data: Callable[[list[dict[str, Any]]], None] | None = None
    id_form: str = ""
    prediction: str | None = None
    option_types: type | None = None
    training_shared_by: str = SHARED_BY_AMORTIZED
    ranked_by: RankedBy | None = JOINT_KL
    data_version: Callable[[dict[str, Any]], str | None] | None = None
    problem_type: type | None = None


class Training(NamedTuple):
    """What a problem id's family declares of its training: `key` names its training data
    (None: it shares no training) and `shared_by` who may train once for one key
    (`testbed.base.SHARED_BY`)."""

    key: str | None
    shared_by: str


FAMILIES: Registry[ProblemFamily] = Registry("problem family")
SWEEPS: Registry[Callable[[], list[str]]] = Registry("sweep")


def register_family(
    name: str,
    settings: Callable[[str], dict[str, Any]],
    description: str = "",
    options: tuple[str, ...] = (),
    training_key: Callable[[dict[str, Any]], str] | None = None,
    require_data: Callable[[list[dict[str, Any]]], None] | None = None,
    id_form: str = "",
    prediction: str | None = None,
    option_types: type | None = None,
    training_shared_by: str = SHARED_BY_AMORTIZED,
    ranked_by: RankedBy | None = JOINT_KL,
    data_version: Callable[[dict[str, Any]], str | None] | None = None,
    problem_type: type | None = None,
):
    """Decorator on `build(settings) -> Problem`: registers the family `name`, whose
    settings named in `options` may be overridden by `load(id, **options)` and whose
    problems need an agent that predicts `prediction` (see ProblemFamily). The options are
    checked against the field types of the dataclass `option_types` (default: the one
    `build` is annotated to return)."""
    if prediction is not None and prediction not in PREDICTIONS:
        raise bad_value(f"family {name}: prediction", prediction, [*PREDICTIONS, None])
    if training_shared_by not in SHARED_BY:
        raise bad_value(f"family {name}: training_shared_by", training_shared_by, SHARED_BY)
    if ranked_by is not None and not isinstance(ranked_by, RankedBy):
        raise bad_value(f"family {name}: ranked_by", ranked_by, "a testbed.ranking.RankedBy")

    def add(build: Callable[[dict[str, Any]], Problem]):
        family = ProblemFamily(
            name,
            settings,
            build,
            description,
            tuple(options),
            training_key,
            require_data,
            id_form or f"{name}/...",
            prediction,
            option_types,
            training_shared_by,
            ranked_by,
            data_version,
            problem_type,
        )
        FAMILIES.register(name, family)
        return build

    return add


def register_table(
    name: str,
    table: list[dict[str, Any]],
    settings_cls: type,
    problem_cls: Callable[[Any], Problem],
    description: str,
    **family: Any,
) -> None:
    """Registers the family and the sweep `name` of an indexed table: id `name/i` is row i,
    checked by the dataclass `settings_cls`, built as `problem_cls(settings_cls(...))`.
    `family`: the other `register_family` arguments (options, prediction, ...)."""

    def settings(rest: str) -> dict:
        return dataclasses.asdict(settings_cls(**index_settings(name, rest, table)))

    def build(settings: dict) -> Problem:
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}
        fields.pop("family", None)
        return problem_cls(settings_cls(**fields))

    register_family(
        name,
        settings,
        f"{description} ({len(table)} ids)",
        id_form=f"{name}/<i>, i = 0..{len(table) - 1}",
        option_types=settings_cls,
        problem_type=problem_cls if isinstance(problem_cls, type) else None,
        **family,
    )(build)
    register_sweep(name)(lambda: [f"{name}/{i}" for i in range(len(table))])


def register_sweep(name: str):
    """Decorator on `() -> list[str]` of problem ids: registers the sweep `name`."""

    def add(ids: Callable[[], list[str]]):
        SWEEPS.register(name, ids)
        return ids

    return add


def split_id(problem_id: str) -> tuple[ProblemFamily, str]:
    if not isinstance(problem_id, str) or "/" not in problem_id:
        raise InputError(malformed_problem_id(problem_id, FAMILIES.names()))
    family, rest = problem_id.split("/", 1)
    return FAMILIES.get(family), rest  # an unknown family: the registry's unknown_name


def problem_settings(problem_id: str) -> dict[str, Any]:
    """The settings of a problem id (what the leaderboard joins onto results)."""
    family, rest = split_id(problem_id)
    return {"family": family.name, **family.settings(rest)}


def training_key(problem_id: str) -> str | None:
    """The key of the training data `problem_id` gives (see ProblemFamily), or None when
    its family does not say (its problems share nothing)."""
    family, rest = split_id(problem_id)
    return None if family.training_key is None else family.training_key(family.settings(rest))


def family_of(problem_id: str) -> ProblemFamily:
    """The registered family of a problem id."""
    return split_id(problem_id)[0]


def data_version(problem_id: str) -> str | None:
    """The version of the data `problem_id` reads (a file's sha256), or None when its
    family reads no data that can change under the same id."""
    family, rest = split_id(problem_id)
    return None if family.data_version is None else family.data_version(family.settings(rest))


def training_shared_by(problem_id: str) -> str:
    """Which agents may train once for the problems of `problem_id`'s training key."""
    return split_id(problem_id)[0].training_shared_by


def training_of(problem_id: str) -> Training:
    """How `problem_id` shares training, as its family declares it (no problem is built):
    problems with one key give the same training data, shared by the agents `shared_by`
    allows."""
    family = split_id(problem_id)[0]
    return Training(training_key(problem_id), family.training_shared_by)


def problem_type_of(family: ProblemFamily) -> type | None:
    """The class of the family's problems: declared, else `build`'s return annotation
    (None when neither says)."""
    if family.problem_type is not None:
        return family.problem_type
    try:
        returns = typing.get_type_hints(family.build).get("return")
    except Exception:  # an annotation that does not resolve says nothing
        return None
    if not isinstance(returns, type) or getattr(returns, "_is_protocol", False):
        return None  # a protocol (`-> Problem`) says nothing of what the problems offer
    return returns


def require_data(problem_ids: Iterable[str]) -> None:
    """Checks, before anything runs, that the data every problem needs is at hand (real
    datasets prepared, data files readable): one InputError naming all that is missing
    and how to get it. Families that need no data are not asked."""
    by_family: dict[str, list[dict[str, Any]]] = {}
    for pid in dict.fromkeys(problem_ids):
        family, rest = split_id(pid)
        if family.require_data is not None:
            by_family.setdefault(family.name, []).append(family.settings(rest))
    for name, settings in by_family.items():
        FAMILIES.get(name).require_data(settings)


def load(problem_id: str, **options: Any) -> Problem:
    """The seeded problem for an id: the same id always gives the same problem.

    `options` change how it is evaluated (e.g. `num_samples=1000` for an `sbi/...` problem,
    `num_test_seeds=100` for a classification one); each family lists the ones it takes.
    """
    threefry_cpu.ensure_installed()  # problems built as the command line builds them
    family, rest = split_id(problem_id)
    unknown = sorted(set(options) - set(family.options))
    if unknown and not family.options:
        raise InputError(
            f"option of {family.name} problems: got {unknown[0]!r}; allowed: none ("
            f"{family.name} problems take no options)"
        )
    if unknown:
        raise unknown_name(f"option of {family.name} problems", unknown[0], family.options)
    problem = family.build({**family.settings(rest), **typed_options(family, options)})
    with contextlib.suppress(AttributeError, TypeError):  # messages name the problem by it
        problem.problem_id = problem_id
    return problem


def typed_options(
    family: ProblemFamily, options: dict[str, Any], where: str | None = None
) -> dict[str, Any]:
    """`options` checked against the field types of the family's `option_types` dataclass
    (else of the dataclass its `build` returns), as agent settings are: `c2st_z_score="no"`
    becomes False, `lc2st=1.5` is refused naming the option. Options that are not its
    fields pass as they are."""
    if not options:
        return options
    cls = family.option_types or problem_type_of(family)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return options
    fields = set(field_types(cls))
    typed = {k: v for k, v in options.items() if k in fields}
    where = where or f"option of {family.name} problems"
    return {**options, **coerce_fields(cls, typed, where=where)}


def family_sweeps() -> dict[str, list[str]]:
    """Family name -> the sweeps whose ids are all of that family (in registry order)."""
    out: dict[str, list[str]] = {name: [] for name in FAMILIES}
    for sweep in SWEEPS:
        families = {i.split("/", 1)[0] for i in SWEEPS.get(sweep)()}
        if len(families) == 1 and (family := families.pop()) in out:
            out[family].append(sweep)
    return out


def sweep_ids(name: str) -> list[str]:
    """The problem ids of a registered sweep, in order."""
    return list(SWEEPS.get(name)())


def sweep_names() -> list[str]:
    return SWEEPS.names()


def parse_int(text: str, field: str, allowed) -> int:
    """`text` as one of the integers `allowed` (written plainly), else a named InputError."""
    try:
        value = int(text)
    except ValueError:
        raise bad_value(field, text, allowed) from None
    if value not in allowed or str(value) != text:
        raise bad_value(field, text, allowed)
    return value


def index_settings(sweep: str, rest: str, table: list[dict[str, Any]]) -> dict[str, Any]:
    """Settings for `rest` = an index into `table` (the usual `sweep/i` id form)."""
    try:
        i = int(rest)
    except ValueError:
        i = -1
    if not (0 <= i < len(table)) or str(i) != rest:
        raise InputError(
            f"problem id: got '{sweep}/{rest}'; allowed: '{sweep}/i' with i in 0..{len(table) - 1}"
        )
    return dict(table[i])
