"""Real-data evaluation: offline (scikit-learn) and TFDS datasets, joint NLL on dyadic batches.

`generative.load("real/iris/10/1")`; the TFDS datasets read prepared array_record data
(no TensorFlow needed) from `data_dir` / $TFDS_DATA_DIR; see `problems` for the id format.
"""

from generative.real_data.datasets import DATASETS, DatasetSpec, RawDataset, get_spec, load_raw
from generative.real_data.problems import RealDataProblem, RealDataSettings, problem_id

__all__ = [
    "DATASETS",
    "DatasetSpec",
    "RawDataset",
    "RealDataProblem",
    "RealDataSettings",
    "get_spec",
    "load_raw",
    "problem_id",
]
