"""The SBI benchmark's own files, read from the sbibm 1.1.0 wheel (MIT licence).

`python -m experiments.sbibm_wheel [--wheel PATH]` writes the benchmark's ten observations
and true parameters of each task to `generative/sbi/observations/<task>.json` (package
data, with their provenance); without --wheel it downloads the wheel with pip. The wheel
holds, per task and k = 1..10, `sbibm/tasks/<task>/files/num_observation_<k>/`
`observation.csv`, `true_parameters.csv` and `reference_posterior_samples.csv.bz2`;
slcp_distractors' observations are `observation_distractors.csv` in the slcp folder and
bernoulli_glm_raw's `observation_raw.csv` in the bernoulli_glm folder (both share the
reference files of the task they extend).
"""

from __future__ import annotations

import argparse
import bz2
import hashlib
import io
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

VERSION = "1.1.0"
WHEEL = f"sbibm-{VERSION}-py2.py3-none-any.whl"
NUM_OBSERVATIONS = 10
OUT = Path(__file__).resolve().parents[1] / "generative" / "sbi" / "observations"
# task -> (folder in the wheel, observation file name)
SOURCES = {
    "gaussian_linear": ("gaussian_linear", "observation.csv"),
    "gaussian_linear_uniform": ("gaussian_linear_uniform", "observation.csv"),
    "slcp": ("slcp", "observation.csv"),
    "slcp_distractors": ("slcp", "observation_distractors.csv"),
    "bernoulli_glm": ("bernoulli_glm", "observation.csv"),
    "bernoulli_glm_raw": ("bernoulli_glm", "observation_raw.csv"),
    "gaussian_mixture": ("gaussian_mixture", "observation.csv"),
    "two_moons": ("two_moons", "observation.csv"),
    "sir": ("sir", "observation.csv"),
    "lotka_volterra": ("lotka_volterra", "observation.csv"),
}


class WheelError(RuntimeError):
    """The wheel cannot be had (no package index) or is not the expected one."""


def download_wheel(folder: str | Path) -> Path:
    """Downloads the sbibm wheel with pip into `folder` (no dependencies)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"sbibm=={VERSION}", "-d"]
    try:
        proc = subprocess.run([*cmd, str(folder)], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise WheelError(f"pip could not download sbibm=={VERSION} in 600 s") from None
    path = Path(folder) / WHEEL
    if proc.returncode != 0 or not path.exists():
        tail = " ".join((proc.stderr or proc.stdout).split())[-300:]
        raise WheelError(f"pip could not download sbibm=={VERSION}: {tail}")
    return path


class Wheel:
    """The files of the sbibm wheel, read without installing it."""

    def __init__(self, path: str | Path, field: str | None = None):
        """`field`: the option that named `path`; a path that is no wheel is then an
        InputError naming it (a user's file), else a WheelError (a download's)."""
        self.path = Path(path)
        why = None
        try:
            self.zip = zipfile.ZipFile(self.path)
        except FileNotFoundError:
            why = "no such file"
        except (OSError, zipfile.BadZipFile):
            why = "not a readable wheel"
        else:
            if not any(n.startswith("sbibm/tasks/") for n in self.zip.namelist()):
                why = "a zip without sbibm's tasks"
        if why is not None:
            if field is None:
                raise WheelError(f"{str(path)!r}: {why}")
            from testbed.errors import InputError

            raise InputError(f"{field}: got {str(path)!r}, {why}; allowed: the {WHEEL} file "
                             f"(pip download --no-deps sbibm=={VERSION})")  # fmt: skip
        self.sha256 = hashlib.sha256(self.path.read_bytes()).hexdigest()

    def _file(self, task: str, k: int, name: str) -> bytes:
        folder = SOURCES[task][0]
        return self.zip.read(f"sbibm/tasks/{folder}/files/num_observation_{k}/{name}")

    def _csv(self, task: str, k: int, name: str) -> np.ndarray:
        text = self._file(task, k, name)
        if name.endswith(".bz2"):
            text = bz2.decompress(text)
        return np.loadtxt(io.BytesIO(text), delimiter=",", skiprows=1, ndmin=2)

    def observation(self, task: str, k: int) -> np.ndarray:
        return self._csv(task, k, SOURCES[task][1])

    def true_parameters(self, task: str, k: int) -> np.ndarray:
        return self._csv(task, k, "true_parameters.csv")

    def reference_samples(self, task: str, k: int) -> np.ndarray:
        """The benchmark's 10,000 reference posterior draws at observation k."""
        return self._csv(task, k, "reference_posterior_samples.csv.bz2")


def observation_file(wheel: Wheel, task: str) -> dict:
    """The JSON content of one task's package data file."""
    folder, name = SOURCES[task]
    return {
        "task": task,
        "source": (
            f"sbibm {VERSION} wheel ({WHEEL}, sha256 {wheel.sha256}, MIT licence): "
            f"sbibm/tasks/{folder}/files/num_observation_<k>/{name} and true_parameters.csv"
        ),
        "generated_by": "python -m experiments.sbibm_wheel",
        "observations": [wheel.observation(task, k)[0].tolist() for k in range(1, 11)],
        "true_parameters": [wheel.true_parameters(task, k)[0].tolist() for k in range(1, 11)],
    }


def write_observations(wheel: Wheel, out: Path = OUT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for task in SOURCES:
        path = out / f"{task}.json"
        path.write_text(json.dumps(observation_file(wheel, task), indent=1) + "\n")
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", help=f"a downloaded {WHEEL} (default: pip download it)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(args.wheel) if args.wheel else download_wheel(folder)
        for written in write_observations(Wheel(path)):
            print(written)


if __name__ == "__main__":
    main()
