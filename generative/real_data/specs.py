"""What a real dataset is (`DatasetSpec`), its raw arrays (`RawDataset`) and the fixed
train/test split of the offline datasets: the leaf every real-data module reads."""

from __future__ import annotations

import dataclasses
from typing import Literal, NamedTuple

import numpy as np

SKLEARN_SPLIT_SEED = 0


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One dataset: where it comes from and its documented sizes.

    `name` is the name used in problem ids; `source_name` the name in its source
    (a TFDS name, a `sklearn.datasets.load_<name>` function, a file's path, or the name
    given to `RealDataProblem.from_arrays`).
    """

    name: str
    source: Literal["tfds", "sklearn", "file", "arrays"]
    source_name: str
    kind: Literal["structured", "image"]
    num_classes: int
    input_dim: int
    num_train: int
    num_test: int


class RawDataset(NamedTuple):
    """Flattened raw inputs [n, d] (uint8 pixels or float64 features), int32 labels [n]."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def offline_split(num_examples: int, seed: int = SKLEARN_SPLIT_SEED):
    """(train indices, test indices): a seeded permutation, its last n // 5 are the test set."""
    perm = np.random.default_rng(seed).permutation(num_examples)
    num_test = num_examples // 5
    return perm[: num_examples - num_test], perm[num_examples - num_test :]
