"""`real/...`: real-data classification problems scored by the joint NLL on dyadic batches.

Ids: `real/<dataset>/<tau>/<seed>` trains on the whole training split and
`real/<dataset>/<tau>/<seed>/<num_train>` on its first num_train examples; <dataset> is a
name of generative.real_data.datasets (`iris`, `digits`, `tfds/mnist`,
`tfds/emnist/letters`, ...) or `file:<path>` for a .npz or .csv file of the user's
(generative.real_data.files): `real/file:/data/mine.npz/10/0`. A file path may hold '/'
(it ends at its .npz or .csv suffix: the two or three integer parts after it are tau, seed
and num_train) but no ','; a relative path is read from the working directory.
The seed only sets the estimator's keys (the data are fixed), as in the reference. With
no true likelihood the score is `joint_nll` (the reference's real-data "kl_estimate"):
-log mean_m prod_t q_m(y_t | x_t) over N = 1000 dyadic test batches (kappa = 2 anchors
from the test set, tau picks with replacement) and M = 1000 sampled functions; tau = 1
gives the marginal NLL. Problems built from ids read TFDS data from $TFDS_DATA_DIR (else
~/tensorflow_datasets) and never download unless TESTBED_TFDS_DOWNLOAD=1;
`require_data(settings)` checks a sweep's datasets are at hand before its first job.
`RealDataProblem.from_arrays` makes a problem of in-memory arrays.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from functools import cached_property
from typing import Literal

import jax
import numpy as np

from generative.input_designs import polyadic_indices
from generative.real_data import files, tfds_loader
from generative.real_data.datasets import (
    DATASETS,
    SKLEARN_DATASETS,
    TFDS_DATASETS,
    DatasetSpec,
    RawDataset,
    get_spec,
    load_raw,
)
from generative.real_data.preprocessing import preprocess
from generative.registry import register_family, register_sweep
from testbed.accuracy import LabelledInputs
from testbed.base import SHARED_BY_ANY, Data, PriorKnowledge
from testbed.config import check_at_least, check_one_of, check_positive, check_sizes
from testbed.errors import InputError, bad_value
from testbed.evaluation import Evidence, EvidenceScoring
from testbed.joint_kl import TestBatches, estimator_keys, sample_keys
from testbed.ranking import JOINT_KL
from testbed.reference_rng import key_sequence, reference_stream
from testbed.registry import unknown_name
from testbed.sizes import check_memory


@dataclasses.dataclass(frozen=True)
class RealDataSettings:
    """Everything that defines a real-data problem (joined onto leaderboard rows).

    num_train None = the whole training split. temperature is only passed on to agents
    (the reference tells them 0.01; it does not change the data). standardize: `example`
    (each example across its own features: the reference's, made for images), `feature`
    (each feature by the training split's mean and std: the usual form for tabular data) or
    `auto` (the default: `feature` for the user's data files, but `example` for their image
    pixels, for the registered datasets and for arrays; see STANDARDIZE).
    """

    dataset: str
    tau: int
    seed: int
    num_train: int | None = None
    kappa: int = 2
    num_test_seeds: int = 1000
    num_enn_samples: int = 1000
    standardize: Literal["example", "feature", "auto"] = "auto"
    temperature: float = 0.01
    num_eval_points: int = 10_000  # test / train points for accuracy, ECE, marginal NLL

    def __post_init__(self):
        check_at_least("tau", self.tau, 1)
        check_at_least("seed", self.seed, 0)
        if self.num_train is not None:
            check_at_least("num_train", self.num_train, 1)
        if files.is_file_dataset(self.dataset):  # sizes are checked when the file is read
            files.check_suffix(self.dataset[len(files.FILE_PREFIX) :], "dataset file")
        elif not self.dataset.startswith(ARRAYS_PREFIX):
            spec = get_spec(self.dataset)
            if self.num_train is not None and not 1 <= self.num_train <= spec.num_train:
                raise InputError(
                    f"num_train: got {self.num_train!r}; allowed: an integer in "
                    f"1..{spec.num_train} (the size of {self.dataset}'s training split)"
                )
        check_sizes(self, kappa=1, num_test_seeds=1, num_enn_samples=1)
        check_one_of("standardize", self.standardize, STANDARDIZE)
        check_positive("temperature", self.temperature)
        check_at_least("num_eval_points", self.num_eval_points, 1)
        sizes = {
            "num_test_seeds": self.num_test_seeds,
            "num_enn_samples": self.num_enn_samples,
            "num_eval_points": self.num_eval_points,
        }
        check_memory(self.estimator_bytes, sizes, "the joint NLL estimator", type(self))

    def estimator_bytes(self, num_test_seeds: int, num_enn_samples: int, num_eval_points: int):
        """Bytes held at once: the N x tau test inputs (float32; a registered dataset's
        input size, else 1: a file's is checked when it is read), the M sampler keys handed
        to each batch, and the test and training points scored for accuracy."""
        spec = None
        if not (files.is_file_dataset(self.dataset) or self.dataset.startswith(ARRAYS_PREFIX)):
            spec = get_spec(self.dataset)
        dim = spec.input_dim if spec is not None else 1
        return (
            4 * num_test_seeds * self.tau * (dim + 2)
            + 8 * num_test_seeds * num_enn_samples
            + 2 * 4 * num_eval_points * (dim + 2)
        )

    @property
    def train_size(self) -> int | None:
        """num_train, else the registered dataset's training size (None for a file or
        arrays: their size is known once they are read)."""
        if self.num_train is not None or self.dataset not in DATASETS:
            return self.num_train
        return get_spec(self.dataset).num_train


ARRAYS_PREFIX = "arrays:"  # datasets given as arrays (RealDataProblem.from_arrays)
# How inputs are standardised. A data file's default is `auto`: per feature, as tabular
# features need (each has its own unit and scale, which per example mixes up: mlp on a
# 10-feature CSV of scales 0.01..1000, tau = 10, scored a joint NLL of 10.8 and accuracy
# 0.44 per example, 1.9 and 0.91 per feature), but per example for uint8 image pixels, as
# the reference does; the registered datasets keep the reference's per example.
STANDARDIZE = ("example", "feature", "auto")


def resolved_standardize(standardize: str, spec: DatasetSpec) -> str:
    """`example` or `feature`: what `auto` means for this dataset (per feature for a data
    file that is not of image pixels, else the reference's per example)."""
    if standardize != "auto":
        return standardize
    return "feature" if spec.source == "file" and spec.kind != "image" else "example"


class RealDataProblem(EvidenceScoring):
    """A real dataset as a problem: train split for the agent, joint NLL on the test split.

    TFDS datasets are read from `data_dir` (default $TFDS_DATA_DIR or
    ~/tensorflow_datasets); `download` lets TFDS prepare a missing dataset (default: what
    TESTBED_TFDS_DOWNLOAD says, off unless it is 1). `from_arrays` makes one of arrays.
    """

    offers = frozenset({"sampler", "data_batches", "labelled_inputs"})
    metrics = ("joint_nll", "accuracy")

    def __init__(
        self,
        settings: RealDataSettings,
        data_dir: str | None = None,
        download: bool | None = None,
    ):
        if settings.dataset.startswith(ARRAYS_PREFIX):
            raise InputError(
                f"dataset: got {settings.dataset!r}; allowed: a registered dataset or "
                "file:<path>; arrays go through RealDataProblem.from_arrays"
            )
        if files.is_file_dataset(settings.dataset):
            spec, raw = files.file_spec(settings.dataset)
        else:
            spec = get_spec(settings.dataset)
            if download is None and spec.source == "tfds":
                download = tfds_loader.download_enabled()
            raw = load_raw(settings.dataset, data_dir=data_dir, download=bool(download))
        self._setup(settings, spec, raw)

    @classmethod
    def from_arrays(
        cls,
        x_train,
        y_train,
        x_test,
        y_test,
        *,
        tau: int,
        seed: int = 0,
        num_classes: int | None = None,
        name: str = "arrays",
        **settings,
    ) -> RealDataProblem:
        """A real-data problem of your own arrays, scored like any `real/...` problem.

        x_train [n, d] and x_test [m, d] are numbers (more axes are flattened), finite, with
        one feature count; y_train [n] and y_test [m] are integer labels 0..C-1, with C =
        `num_classes` or the largest label + 1. `settings` are RealDataSettings fields
        (num_train, standardize, kappa, num_test_seeds, num_enn_samples, temperature,
        num_eval_points); `name` labels the dataset (`arrays:<name>`).
        """
        raw, num_classes = files.check_arrays(x_train, y_train, x_test, y_test, num_classes)
        spec = files.arrays_spec(ARRAYS_PREFIX + name, "arrays", name, raw, num_classes)
        allowed = _FIELDS - {"dataset", "tau", "seed"}
        unknown = sorted(set(settings) - allowed)
        if unknown:
            raise bad_value("from_arrays option", unknown[0], ["num_classes", *sorted(allowed)])
        problem = cls.__new__(cls)
        problem._setup(
            RealDataSettings(dataset=spec.name, tau=tau, seed=seed, **settings), spec, raw
        )
        return problem

    def _setup(self, settings: RealDataSettings, spec: DatasetSpec, raw: RawDataset) -> None:
        self.settings = s = settings
        self.spec = spec
        n = len(raw.y_train) if s.num_train is None else s.num_train
        if n > len(raw.y_train):
            raise InputError(
                f"num_train: got {n}; allowed: at most {len(raw.y_train)} (the training "
                f"examples of {s.dataset} found in its data)"
            )
        if len(raw.y_test) == 0:
            raise InputError(f"dataset {s.dataset}: the test split is empty; allowed: >= 1 row")
        self.standardize = resolved_standardize(s.standardize, spec)  # what was done
        x_train, x_test = preprocess(
            raw.x_train[:n], raw.x_test, spec.kind, self.standardize, stats_from=raw.x_train
        )
        self.train_data = Data(x=x_train, y=np.asarray(raw.y_train[:n], np.int32))
        self.x_test, self.y_test = x_test, np.asarray(raw.y_test, np.int32)
        with reference_stream():  # the reference's estimator key: PRNGSequence(seed)'s first
            self._estimator_key = key_sequence(s.seed, 1)[0]

    training_shared_by = SHARED_BY_ANY  # tau and seed change only the scoring

    @property
    def training_key(self) -> str:
        """One key per training set: the dataset, its size and preprocessing (tau and the
        seed only change the test batches)."""
        return real_training_key(dataclasses.asdict(self.settings))

    @cached_property
    def prior_knowledge(self) -> PriorKnowledge:
        s = self.settings
        return PriorKnowledge(
            input_dim=self.spec.input_dim,
            num_train=len(self.train_data.y),
            num_classes=self.spec.num_classes,
            tau=s.tau,
            temperature=s.temperature,
        )

    def test_indices(self, key: jax.Array, num_batches: int, tau: int) -> np.ndarray:
        """[N, tau] dyadic batches of test-set rows: kappa anchors, tau picks from them."""
        with reference_stream():
            idx = polyadic_indices(key, num_batches, tau, self.settings.kappa, len(self.y_test))
        return np.asarray(idx)

    def test_batches(self, key: jax.Array, num_batches: int, tau: int):
        """x [N, tau, d] and y [N, tau] of dyadic test batches."""
        idx = self.test_indices(key, num_batches, tau)
        return self.x_test[idx], self.y_test[idx]

    def estimator_batches(self) -> TestBatches:
        """The estimator's N dyadic test batches (no true likelihood) and M sampler keys."""
        s = self.settings
        with reference_stream():
            kl_key, keys = estimator_keys(self._estimator_key, s.num_enn_samples)
        x, y = self.test_batches(kl_key, s.num_test_seeds, s.tau)
        return TestBatches(x, y, keys, num_classes=self.spec.num_classes)

    def _eval_rows(self, n: int, key: jax.Array) -> np.ndarray:
        """All rows if n <= num_eval_points, else a fixed random subset of that size."""
        if n <= self.settings.num_eval_points:
            return np.arange(n)
        return np.sort(
            np.asarray(jax.random.choice(key, n, (self.settings.num_eval_points,), replace=False))
        )

    def labelled_inputs(self, num_enn_samples: int = 100) -> LabelledInputs:
        """Test and training rows (at most num_eval_points each, a fixed subset) scored by the
        mean predictive over M = 100 functions (as the reference)."""
        splits = {}
        for i, (name, (xs, ys)) in enumerate(
            {"test": (self.x_test, self.y_test), "train": self.train_data}.items()
        ):
            rows = self._eval_rows(len(ys), jax.random.PRNGKey(i + 1))
            splits[name] = (np.asarray(xs)[rows], np.asarray(ys)[rows])
        with reference_stream():  # the reference's M keys for accuracy and calibration
            keys = sample_keys(jax.random.split(jax.random.PRNGKey(0))[1], num_enn_samples)
        return LabelledInputs(splits, keys, self.spec.num_classes)

    def evidence(self, sampler) -> Evidence:
        return Evidence(
            {
                "sampler": lambda _: sampler,
                "data_batches": lambda _: self.estimator_batches(),
                "labelled_inputs": lambda _: self.labelled_inputs(),
            }
        )


# Problem ids.


FILE_FORM = "'real/file:<path>.npz|.csv/<tau>/<seed>[/<num_train>]'"


def parse_file_rest(rest: str) -> dict:
    """`file:<path>/<tau>/<seed>[/<num_train>]` -> settings fields: the path ends at its
    .npz or .csv suffix, followed by two or three integers."""
    parts = rest.split("/")
    for k in (2, 3):
        path = "/".join(parts[:-k])[len(files.FILE_PREFIX) :]
        tail = parts[-k:]
        if (
            len(parts) > k
            and path.lower().endswith(files.SUFFIXES)
            and all(p.isdigit() and str(int(p)) == p for p in tail)
        ):
            fields = {"dataset": files.FILE_PREFIX + path, "tau": int(tail[0])}
            fields["seed"] = int(tail[1])
            if k == 3:
                fields["num_train"] = int(tail[2])
            return fields
    raise InputError(
        f"problem id: got 'real/{rest}'; allowed: {FILE_FORM} (e.g. "
        "real/file:/data/mine.npz/10/0), with integers after the path"
    )


def parse_rest(rest: str) -> dict:
    """`<dataset>/<tau>/<seed>[/<num_train>]` -> settings fields (InputError if malformed)."""
    if rest.startswith(files.FILE_PREFIX):
        return parse_file_rest(rest)
    form = "'real/<dataset>/<tau>/<seed>' or 'real/<dataset>/<tau>/<seed>/<num_train>'"
    if rest in DATASETS:
        raise InputError(f"problem id: got 'real/{rest}'; allowed: {form}")
    names = sorted((n for n in DATASETS if rest.startswith(n + "/")), key=len)
    if not names:
        raise unknown_name(
            "dataset",
            rest.rsplit("/", 2)[0] if "/" in rest else rest,
            [*DATASETS, "file:<path>.npz|.csv"],
        )
    dataset = names[-1]
    parts = rest[len(dataset) + 1 :].split("/")
    if len(parts) not in (2, 3) or not all(p.isdigit() and str(int(p)) == p for p in parts):
        raise InputError(f"problem id: got 'real/{rest}'; allowed: {form} with integers")
    fields = {"dataset": dataset, "tau": int(parts[0]), "seed": int(parts[1])}
    if len(parts) == 3:
        fields["num_train"] = int(parts[2])
    return fields


def problem_id(dataset: str, tau: int, seed: int, num_train: int | None = None) -> str:
    tail = "" if num_train is None else f"/{num_train}"
    return f"real/{dataset}/{tau}/{seed}{tail}"


def _settings(rest: str) -> dict:
    """The settings of an id. A file id's settings come from the id alone (the file is
    read when the problem is built), so they never depend on the file being at hand."""
    settings = RealDataSettings(**parse_rest(rest))
    out = dataclasses.asdict(settings)
    out["num_train"] = settings.train_size
    if files.is_file_dataset(settings.dataset):  # `auto`: known once the file is read
        out.update(source="file", path=settings.dataset[len(files.FILE_PREFIX) :])
        return out
    if out["standardize"] == "auto":  # a registered dataset: the reference's per example
        out["standardize"] = "example"
    spec = get_spec(settings.dataset)
    out.update(input_dim=spec.input_dim, num_classes=spec.num_classes, source=spec.source)
    return out


_FIELDS = {f.name for f in dataclasses.fields(RealDataSettings)}


def require_data(settings: list[dict]) -> None:
    """Checks that the data of every problem (settings of `real/...` ids) is at hand,
    before a sweep's first job: one InputError naming every missing dataset and how to
    prepare it. Files are read and checked; TFDS datasets are looked for in
    $TFDS_DATA_DIR (else ~/tensorflow_datasets) and, when TESTBED_TFDS_DOWNLOAD=1,
    prepared here once each instead."""
    problems: list[str] = []
    missing_tfds: list[DatasetSpec] = []
    seen: set[str] = set()
    download = None
    for s in settings:
        name = s["dataset"]
        if files.is_file_dataset(name):
            try:
                spec = files.file_spec(name)[0]
            except InputError as e:
                if name not in seen:
                    problems.append(str(e))
            else:
                if s.get("num_train") is not None and s["num_train"] > spec.num_train:
                    problems.append(
                        f"num_train: got {s['num_train']} for {name}; allowed: at most "
                        f"{spec.num_train} (its training examples)"
                    )
            seen.add(name)
            continue
        spec = get_spec(name)
        if spec.source != "tfds" or name in seen:
            continue
        seen.add(name)
        root = tfds_loader.resolve_data_dir(None)
        state = tfds_loader.prepared_state(spec, root)
        if state == "other_format":
            problems.append(
                f"dataset {name}: {root / spec.source_name} holds no array_record files "
                "(prepared in another format, or incomplete); allowed: array_record data. "
                "Convert it: tfds convert_format --dataset_dir=<its version folder> "
                f"--out_file_format=array_record, or delete it and "
                f"{tfds_loader.build_command([spec.source_name], root)}"
            )
        if state == "missing":
            download = tfds_loader.download_enabled() if download is None else download
            if not download:
                missing_tfds.append(spec)
                continue
            try:  # prepared here, once, not by every job at the same time
                load_raw(name, download=True)
            except InputError as e:
                problems.append(str(e))
    if missing_tfds:
        root = tfds_loader.resolve_data_dir(None)
        names = [s.source_name for s in missing_tfds]
        problems.insert(
            0,
            f"TFDS datasets not prepared in {tfds_loader.where_looked(None)}: "
            f"{', '.join(s.name for s in missing_tfds)}; prepare them once on a machine with "
            f"network: {tfds_loader.PREPARE_PACKAGES}; then "
            f"{tfds_loader.build_command(names, root)} (or set TFDS_DATA_DIR to a folder "
            f"that holds them prepared, or {tfds_loader.DOWNLOAD_ENV}=1 to let TFDS prepare "
            "them before the sweep)",
        )
    if problems:
        raise InputError("no job started: " + " | ".join(problems))


# Real data have no true likelihood: ranked on the joint NLL by the Neural Testbed's rules.
REAL_NLL = dataclasses.replace(  # the joint KL's rule and normaliser, on the joint NLL
    JOINT_KL, score="joint_nll", name="joint NLL (real data)", short="nll",
    marginal_name="marginal NLL (real data)", finite_share="pct_finite_nll",
    note=(
        "Real data have no true likelihood: the score is the joint negative log-likelihood "
        "of tau test labels (lower is better), cleaned, normalised and ranked by the "
        "Neural Testbed's rules (negative clipped to 0, missing or non-finite counts 1e6, "
        "best config per agent)."
    ),
)  # fmt: skip


def real_training_key(settings: dict) -> str:
    """What decides a real-data problem's training data and what its agent is told."""
    fields = ("dataset", "num_train", "standardize", "temperature")
    return "real/" + "/".join(f"{f}={settings.get(f)}" for f in fields)


@register_family(
    "real",
    _settings,
    "real datasets (sklearn offline, TFDS, file:<path>.npz|.csv): joint NLL, dyadic",
    options=("num_test_seeds", "num_enn_samples", "num_eval_points", "standardize"),
    require_data=require_data,
    id_form="real/<dataset>/<tau>/<seed>[/<num_train>], dataset: iris, tfds/mnist, "
    "file:<path.npz|.csv>, ...",
    prediction="labels",
    option_types=RealDataSettings,
    training_key=real_training_key,
    training_shared_by=SHARED_BY_ANY,
    ranked_by=REAL_NLL,
    data_version=lambda settings: files.data_version(settings["dataset"]),
)
def build(settings: dict) -> RealDataProblem:
    return RealDataProblem(RealDataSettings(**{k: v for k, v in settings.items() if k in _FIELDS}))


# Sweeps, in the reference's loop order: tau -> dataset -> (num_train ->) seed.
TAUS = (1, 10)
SEEDS = (1, 2, 3, 4, 5)


def train_sizes(dataset_size: int) -> list[int]:
    """1, 10, 100, ... below the dataset size, then the dataset size itself."""
    sizes = [10**k for k in range(int(math.log10(dataset_size)) + 1) if 10**k < dataset_size]
    return sizes + [dataset_size]


def main_ids(specs) -> list[str]:
    return [problem_id(d.name, tau, seed) for tau in TAUS for d in specs for seed in SEEDS]


def variant_data_ids(specs) -> list[str]:
    return [
        problem_id(d.name, tau, seed, n)
        for tau in TAUS
        for d in specs
        for n in train_sizes(d.num_train)
        for seed in SEEDS
    ]


def register_dataset_sweeps(name: str, specs) -> None:
    """Registers the sweeps `name` (`main_ids`: datasets x tau {1, 10} x 5 seeds) and
    `<name>_variant_data` (`variant_data_ids`: also x training sizes 1, 10, ..., capped at
    each dataset's size) over the datasets `specs`."""
    register_sweep(name)(functools.partial(main_ids, specs))
    register_sweep(f"{name}_variant_data")(functools.partial(variant_data_ids, specs))


# "real": the reference's real-data sweep, its 10 TFDS datasets (100 problems);
# "real_offline": the scikit-learn datasets, no network needed (40 problems).
register_dataset_sweeps("real", TFDS_DATASETS)
register_dataset_sweeps("real_offline", SKLEARN_DATASETS)


@register_sweep("real_offline_test")
def real_offline_test_ids() -> list[str]:
    """A tiny smoke sweep: iris, tau {1, 10}, one seed."""
    return [problem_id("iris", tau, 1) for tau in TAUS]
