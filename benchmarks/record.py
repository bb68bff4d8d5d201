"""What a benchmark run measured, stored for the speed table (benchmarks/speed_table.py).

Each benchmark writes its rows to `benchmarks/results/<script>.json` (`--no-record` to
skip): per row the case, our time, the reference's time and what the reference is, the
ratios (wall and CPU), whether the outputs agreed, and when, at which commit and on which
machine it was measured. A row replaces the stored row of the same case. `Meter` measures
how quiet the machine was: the CPU time that processes other than this benchmark (and the
children it waited for) used during the run, in cores.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def own_cpu() -> float:
    """CPU seconds of this process and of the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def busy_cpu() -> float | None:
    """CPU seconds the whole machine has been busy since boot (/proc/stat), or None."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Wall time, own CPU time and the other processes' load over a stretch of a run."""

    def __init__(self):
        self.wall, self.cpu, self.busy = time.perf_counter(), own_cpu(), busy_cpu()

    def others(self) -> float | None:
        """Mean number of cores that other processes kept busy since the start."""
        busy = busy_cpu()
        if busy is None or self.busy is None:
            return None
        wall = time.perf_counter() - self.wall
        return max(0.0, (busy - self.busy) - (own_cpu() - self.cpu)) / max(wall, 1e-9)

    def load_note(self) -> str:
        others = self.others()
        if others is None:
            return "load of other processes unknown"
        quiet = "quiet" if others < 0.15 else "shared"
        return f"{quiet}: other processes used {others:.2f} of {os.cpu_count()} cores"


def commit() -> str:
    """Short commit of the working tree (+ '-dirty' when benchmarks/ or testbed/ differ)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "benchmarks/*.py", "testbed"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + ("-dirty" if dirty else "")


def machine() -> str:
    """Processor model and core count, e.g. 'AMD EPYC 7B13, 2 cores'."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def save(script: str, rows: list[dict], meter: Meter | None = None) -> Path:
    """Stores `rows` (dicts with at least 'case') for `script`, replacing rows of the same
    case; stamps each with date, commit, machine and the load note of `meter`."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{Path(script).stem}.json"
    stored = json.loads(path.read_text()) if path.exists() else []
    stamp = {
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "machine": machine(),
        "load": meter.load_note() if meter else "load not measured",
    }
    cases = {row["case"] for row in rows}
    kept = [row for row in stored if row["case"] not in cases]
    path.write_text(json.dumps(kept + [{**row, **stamp} for row in rows], indent=1) + "\n")
    print(f"recorded {len(rows)} row(s) in {path.relative_to(ROOT)}", flush=True)
    return path


def cache_env(cache: str) -> dict[str, str]:
    """This process's environment for a worker with TESTBED_JAX_CACHE=cache (a folder, or
    'off'), without the user's JAX_COMPILATION_CACHE_DIR (which would take precedence)."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["TESTBED_JAX_CACHE"] = cache
    return env


def run_worker(cmd: list[str], env: dict[str, str] | None = None, what: str = "worker") -> dict:
    """Runs a benchmark's worker process (`env`: None inherits this one's) and returns what
    it measured: the JSON object on the last line of its output."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ratio(reference: float, ours: float) -> str:
    """'12x' (two significant figures below 100, whole numbers above)."""
    if ours <= 0:
        return "n/a"
    r = reference / ours
    return f"{r:.0f}x" if r >= 100 else f"{r:.2g}x" if r < 10 else f"{r:.0f}x"


def arguments(parser: Any) -> Any:
    """A benchmark's start, as every entry point's: testbed's threefry lowering installed
    (the same bits as JAX's, faster on the CPU), then its arguments parsed."""
    from testbed import threefry_cpu

    threefry_cpu.install()
    return parser.parse_args()
