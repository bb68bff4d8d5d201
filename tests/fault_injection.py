"""Fault injection on a scratch results store: the probes that found the store's faults,
repeated. Prints, per probe, the rows lost and the rows doubled; every probe must give
(0, 0).

    python tests/fault_injection.py [--folder DIR] [--jobs N] [--seed S] [--only TEXT] [--ray]

Probes (each on a fresh store in DIR, default a temporary folder, with N quick jobs of the
`lbfault/clock` test problems run by `testbed sweep` in processes of their own):

- kill -9: the sweep's driver is killed mid-sweep, then the sweep is run again;
- Ctrl-C: the driver's process group gets SIGINT mid-sweep, then the sweep runs again;
- concurrent: three identical sweeps at once on one store (a job run by two is doubled);
- corrupt rows: finished rows get metrics that do not parse; the sweep runs again;
- damaged WAL: a killed driver's WAL gets 100 random bytes; the store is refused, salvaged
  into a new file, and the sweep runs again on it;
- truncated: the store is cut to half its size, salvaged, and the sweep runs again;
- damaged WAL through a link: the damaged-WAL probe with every command given a symbolic
  link to the store (the store must be refused through the link too);
- another store's WAL: a killed sweep's `-wal` of another store is copied beside the
  finished store; it must be refused in one line (status 2), then moved aside, and the
  sweep runs again;
- zeroed WAL: a killed driver's `-wal` is overwritten with zeros; the store must be
  refused in one line, salvaged without it (`--wal ignore`), and the sweep runs again;
- a training group killed between its rows: the driver dies as the second row of a tau
  pair (two jobs, one training) is stored; the store holds both rows or neither, and the
  re-run stores both from one training (`shared_training` 2);
- malformed command lines: `MALFORMED`, the `testbed` lines a hostile user types (bad
  flags, bad values, missing and extra arguments, folders, links, missing paths, NaN, inf,
  negative and huge numbers, unknown names): each must end in exactly one `testbed:` line
  on stderr and status 2, no traceback, and make no file (in a folder of fixtures: a
  store, a text file, folders, a dangling and a looping link);
- the Ray cluster's faults (the head's death, a lost node of a local two-node cluster):
  `--ray` runs `tests/test_ray_faults.py`'s slow tests, which assert one line, status 3
  and what is stored for the head, every job stored once for the node (left out by
  default: the slow tier runs those tests itself; with --ray, about 2 more minutes).

Lost: jobs of the sweep without an `ok` row at the end. Doubled: rows stored twice for one
job, or (concurrent sweeps) jobs that two sweeps both ran. A fault not in one line: a
malformed command line, a refused store or a cluster fault that did not end in one
`testbed:` line with its status (and, for a command line, no traceback and no file made).
The exit status is 0 when every probe gave 0 of each.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# A terminal's foreground job has SIGINT at its default (a background shell ignores it).
AS_A_TERMINAL_STARTS_IT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


class Probe:
    """One scratch store and the sweep that fills it."""

    def __init__(self, folder: Path, name: str, jobs: int):
        self.folder = folder / name
        self.folder.mkdir(parents=True)
        self.db = self.folder / "results.db"
        self.log = self.folder / "ran.log"
        self.ids = [f"lbfault/clock-{i}" for i in range(jobs)]

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}",
                "LBFAULT_LOG": str(self.log), "LBFAULT_SLEEP": "0.2"}  # fmt: skip

    def argv(self, db: Path | None = None, executor: str = "local") -> list[str]:
        return [
            "-m", "experiments.cli", "sweep", "--agent", "uniform", "--problem",
            ",".join(self.ids), "--import", "leaderboard_faults", "--results",
            str(db or self.db), "--quiet", "--executor", executor,
            *(["--workers", "2"] if executor == "local" else []),
        ]  # fmt: skip

    def start(self, db: Path | None = None, executor: str = "local") -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", AS_A_TERMINAL_STARTS_IT, *self.argv(db, executor)],
            cwd=ROOT, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip

    def run(self, db: Path | None = None, executor: str = "local") -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, *self.argv(db, executor)],
            cwd=ROOT, env=self.env(), capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"sweep exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def stored(self, db: Path | None = None) -> int:
        try:
            with sqlite3.connect(db or self.db, timeout=1) as conn:
                return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        except sqlite3.Error:
            return 0

    def wait_for_rows(self, proc: subprocess.Popen, rows: int) -> None:
        deadline = time.monotonic() + 300
        while self.stored() < rows and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)

    def outcome(self, db: Path | None = None, count_runs: bool = False) -> tuple[int, int]:
        """(jobs without an ok row, rows doubled): read as any SQL user reads the file."""
        with sqlite3.connect(db or self.db) as conn:
            rows = conn.execute("SELECT problem_id, status FROM results").fetchall()
        conn.close()
        per_job = collections.Counter(pid for pid, _ in rows)
        ok = {pid for pid, status in rows if status == "ok"}
        lost = sum(1 for pid in self.ids if pid not in ok)
        doubled = sum(n - 1 for n in per_job.values() if n > 1)
        if count_runs and self.log.exists():  # jobs that two sweeps ran
            lines = self.log.read_text().splitlines()
            runs = collections.Counter(line.split()[0] for line in lines if line)
            doubled += sum(n - 1 for n in runs.values() if n > 1)
        return lost, doubled


def kill_probe(probe: Probe, rng: random.Random, how: str) -> tuple[int, int]:
    proc = probe.start()
    probe.wait_for_rows(proc, rng.randrange(2, len(probe.ids) // 2))
    if how == "kill":
        os.kill(proc.pid, signal.SIGKILL)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=120)
    probe.run()
    return probe.outcome()


def concurrent_probe(probe: Probe, rng: random.Random) -> tuple[int, int]:
    from leaderboard.store import ResultsStore

    ResultsStore(probe.db).close()  # one file, created once
    procs = [probe.start(executor="inline") for _ in range(3)]
    for proc in procs:
        proc.communicate(timeout=600)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"a concurrent sweep exited {proc.returncode}")
    return probe.outcome(count_runs=True)


def corrupt_probe(probe: Probe, rng: random.Random) -> tuple[int, int]:
    probe.run()
    with sqlite3.connect(probe.db) as conn:
        keys = [k for (k,) in conn.execute("SELECT key FROM results")]
        for key in rng.sample(keys, max(1, len(keys) // 4)):
            bad = '{"kl_estimate": 0.'  # cut short: not JSON
            conn.execute("UPDATE results SET metrics = ? WHERE key = ?", (bad, key))
    conn.close()
    probe.run()
    return probe.outcome()


def damaged_wal_probe(probe: Probe, rng: random.Random) -> tuple[int, int]:
    proc = probe.start()
    probe.wait_for_rows(proc, len(probe.ids) - 2)
    os.kill(proc.pid, signal.SIGKILL)  # its rows stay in the WAL
    proc.communicate(timeout=120)
    damage_wal(probe.db, rng)
    return salvage_and_resume(probe)


def truncated_probe(probe: Probe, rng: random.Random) -> tuple[int, int]:
    probe.run()
    data = probe.db.read_bytes()
    probe.db.write_bytes(data[: len(data) // 2])
    return salvage_and_resume(probe)


def linked_wal_probe(probe: Probe, rng: random.Random) -> tuple[int, int]:
    """The damaged-WAL probe, every command through a symbolic link to the store."""
    link = probe.folder / "latest.db"
    link.symlink_to(probe.db)
    proc = probe.start(link)
    probe.wait_for_rows(proc, len(probe.ids) - 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    damage_wal(probe.db, rng)
    return salvage_and_resume(probe, link)


def foreign_wal_probe(probe: Probe, rng: random.Random) -> tuple[int, int]:
    """Another store's WAL beside the finished store: refused, moved aside, resumed."""
    probe.run()
    other = Probe(probe.folder, "other", len(probe.ids))
    other.ids = [f"lbfault/clock-{100 + i}" for i in range(len(probe.ids))]
    proc = other.start()
    other.wait_for_rows(proc, len(other.ids) // 2)
    os.kill(proc.pid, signal.SIGKILL)  # its rows stay in its WAL
    proc.communicate(timeout=120)
    wal = probe.db.with_name(probe.db.name + "-wal")
    shutil.copyfile(other.db.with_name(other.db.name + "-wal"), wal)
    if not refused_in_one_line(probe, "is not the WAL of"):
        return len(probe.ids), 0  # read as the other store's: every row counts as lost
    wal.rename(wal.with_name(wal.name + ".other"))  # the user's decision
    probe.run()
    return probe.outcome()


def zeroed_wal_probe(probe: Probe, rng: random.Random) -> tuple[int, int]:
    """A killed driver's WAL overwritten with zeros: refused, salvaged without it, resumed."""
    proc = probe.start()
    probe.wait_for_rows(proc, len(probe.ids) // 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    wal = probe.db.with_name(probe.db.name + "-wal")
    if wal.exists():
        wal.write_bytes(bytes(wal.stat().st_size))
        if not refused_in_one_line(probe, "no WAL header"):
            return len(probe.ids), 0
    return salvage_and_resume(probe, wal_choice="ignore")


def group_kill_probe(probe: Probe, rng: random.Random) -> tuple[int, int]:
    """A driver killed as the second row of a training group (a tau pair: two jobs, one
    training) is stored: both rows or neither; the re-run stores both from one training.
    Lost: a job without an ok row from the shared training (a part trained alone)."""
    from test_training_group_commit import SWEEP

    ids = ["pairtest/1", "pairtest/10"]

    def sweep(kill: bool) -> int:
        return subprocess.run(
            [sys.executable, "-c", SWEEP.format(root=str(ROOT)), str(probe.db),
             "kill" if kill else "-"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        ).returncode  # fmt: skip

    def rows() -> list[tuple[str, str, str]]:
        with sqlite3.connect(probe.db) as conn:
            found = conn.execute("SELECT problem_id, status, metrics FROM results").fetchall()
        conn.close()
        return found

    if sweep(kill=True) != 9:  # 9: killed while storing the group, as asked
        raise RuntimeError("the group's driver was not killed between its rows")
    split = len(rows()) not in (0, len(ids))
    print(f"  ({len(rows())} of the group's {len(ids)} rows stored at the kill)", flush=True)
    if sweep(kill=False) != 0:
        raise RuntimeError("the re-run of the training group failed")
    stored = rows()
    whole = {pid for pid, status, m in stored if status == "ok" and '"shared_training": 2' in m}
    per_job = collections.Counter(pid for pid, _, _ in stored)
    lost = sum(1 for pid in ids if pid not in whole) + (1 if split else 0)
    return lost, sum(n - 1 for n in per_job.values() if n > 1)


# The `testbed` command lines a hostile user types, each run in a folder of fixtures:
# good.db (a store with rows), text.db (text), adir/ and adir.csv/ (folders), dangling.db
# (a link to nothing), loop.db (a link to itself), link-to-good.db. Each must end in one
# `testbed:` line on stderr, status 2, no traceback, no file made.
MALFORMED = [
    # the command, its flags, missing and extra arguments
    "",
    "frobnicate",
    "run --agnet uniform --problem coin/1",
    "run --agent",
    "run --agent uniform --problem coin/1 extra",
    "list agent",
    "sweep --agent uniform",
    "sweep --agent uniform --sweep coin --executor dask",
    "leaderboard --results good.db --format xml",
    "salvage --results good.db",
    # numbers: NaN, inf, negative, huge, not numbers
    "run --agent uniform --problem coin/1 --seed nan",
    "run --agent uniform --problem coin/1 --seed -1",
    "run --agent uniform --problem coin/1 --seed 1e300",
    "sweep --agent uniform --sweep coin --workers -3",
    "sweep --agent uniform --sweep coin --timeout nan",
    "sweep --agent uniform --sweep coin --seeds 0-99999999",
    "run --agent uniform --problem classification_2d/0 --option num_test_seeds=1e9",
    "run --agent uniform --problem classification_2d/0 --option num_enn_samples=inf",
    "run --agent ensemble --problem classification_2d/0 --set num_ensemble=1e12",
    "run --agent mlp --problem classification_2d/0 --set learning_rate=nan",
    "run --agent beta_bernoulli --problem coin/1 --set a=-1",
    "leaderboard --results good.db --tau -1",
    "run --agent uniform --problem coin/1e400",
    "run --agent npe --problem sbi/two_moons/inf/1",
    # unknown names
    "run --agent nope --problem coin/1",
    "run --agent uniform --problem nope/1",
    "run --agent uniform --problem coin/1 --metrics nope",
    "run --agent beta_bernoulli --problem coin/1 --set zz=1",
    "leaderboard --results good.db --normalize nope",
    "list agents --import missing.py",
    # paths: folders, links, missing files, not a store, side files, inputs as outputs
    "leaderboard --results adir",
    "leaderboard --results dangling.db",
    "leaderboard --results loop.db",
    "leaderboard --results text.db",
    "leaderboard --results good.db-wal",
    "sweep --agent uniform --problem coin/1 --results adir",
    "report --results good.db --out nofolder/r.html",
    "report --results good.db --out link-to-good.db",
    "leaderboard --results good.db --export adir",
    "salvage --results missing.db --out new.db",
    "run --agent uniform --problem real/file:adir.csv/1/1",
]  # fmt: skip
NOT_ONE_LINE: list[str] = []  # every fault that did not end in one line with its status


def malformed_probe(probe: Probe, rng: random.Random) -> tuple[int, int]:
    """Each line of MALFORMED, in a copy of the fixtures of its own (three at a time): one
    `testbed:` line, status 2, no traceback, no file made (a store's own `-wal` / `-shm`
    beside it, which any reader leaves, are not files made)."""
    from concurrent.futures import ThreadPoolExecutor

    fixtures = probe.folder / "fixtures"
    fixtures.mkdir()
    probe.run(fixtures / "good.db", executor="inline")
    (fixtures / "adir").mkdir()
    (fixtures / "adir.csv").mkdir()
    (fixtures / "text.db").write_text("not a store\n")
    (fixtures / "dangling.db").symlink_to("gone.db")  # relative: a copy's links stay its own
    (fixtures / "loop.db").symlink_to("loop.db")
    (fixtures / "link-to-good.db").symlink_to("good.db")
    env = {**probe.env(), "TESTBED_PROGRESS": "off"}

    def files(folder: Path) -> set[str]:
        return {str(p.relative_to(folder)) for p in folder.rglob("*")} - {
            "good.db-wal", "good.db-shm"
        }  # fmt: skip

    def typed(numbered: tuple[int, str]) -> str | None:
        """What was wrong with the line's ending, or None."""
        n, line = numbered
        folder = probe.folder / f"line{n}"
        shutil.copytree(fixtures, folder, symlinks=True)
        before = files(folder)
        proc = subprocess.run(
            [sys.executable, "-m", "experiments.cli", *shlex.split(line)],
            cwd=folder, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        said = [x for x in proc.stderr.splitlines() if x.strip()]
        made = sorted(files(folder) - before)
        if (
            proc.returncode == 2
            and len(said) == 1
            and said[0].startswith("testbed: ")
            and "Traceback" not in proc.stderr
            and not made
        ):
            return None
        return f"status {proc.returncode}, made {made}, stderr {proc.stderr.strip()[-300:]!r}"

    with ThreadPoolExecutor(3) as pool:
        for line, wrong in zip(MALFORMED, pool.map(typed, enumerate(MALFORMED))):
            if wrong is not None:
                NOT_ONE_LINE.append(f"testbed {line}")
                print(f"  NOT one line, status 2: `testbed {line}`: {wrong}", flush=True)
    print(f"  ({len(MALFORMED)} command lines)", flush=True)
    return 0, 0


def ray_probe() -> tuple[int, int]:
    """The Ray head's death and a lost node: tests/test_ray_faults.py's slow tests."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-m", "slow", "-p", "no:cacheprovider",
         str(TESTS / "test_ray_faults.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    print(f"  ({proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr})")
    if proc.returncode != 0:
        NOT_ONE_LINE.append("the Ray cluster's faults (tests/test_ray_faults.py)")
    return 0, 0


def refused_in_one_line(probe: Probe, words: str) -> bool:
    """Whether `testbed leaderboard` refuses the store with status 2 in one line."""
    check = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "leaderboard", "--results", str(probe.db)],
        cwd=ROOT, env=probe.env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = check.stderr.strip().splitlines()
    ok = check.returncode == 2 and len(lines) == 1 and words in lines[0]
    if not ok:
        NOT_ONE_LINE.append(f"testbed leaderboard on {probe.db} ({words!r})")
    print(f"  ({'refused' if ok else 'NOT refused'}: {check.stderr.strip()[:200]})", flush=True)
    return ok


def damage_wal(db: Path, rng: random.Random) -> None:
    wal = db.with_name(db.name + "-wal")
    if wal.exists() and wal.stat().st_size > 200:
        with open(wal, "r+b") as f:
            f.seek(rng.randrange(0, wal.stat().st_size - 100))
            f.write(bytes(rng.randrange(256) for _ in range(100)))


def salvage_and_resume(
    probe: Probe, given: Path | None = None, wal_choice: str = "check"
) -> tuple[int, int]:
    """`testbed salvage` into a new file when the store is refused, then the sweep again
    (the store named as `given`, e.g. a link to it)."""
    given = given or probe.db
    check = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "leaderboard", "--results", str(given)],
        cwd=ROOT, env=probe.env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    target = given
    if check.returncode == 2 and ("testbed salvage" in check.stderr or wal_choice != "check"):
        target = probe.folder / "salvaged.db"
        said = subprocess.run(
            [sys.executable, "-m", "experiments.cli", "salvage", "--results", str(given),
             "--out", str(target), "--wal", wal_choice],
            cwd=ROOT, env=probe.env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        print(f"  ({(said.stdout or said.stderr).strip()})", flush=True)
        if not target.exists():  # nothing could be read: the sweep starts over
            target = probe.folder / "fresh.db"
    probe.run(target)
    return probe.outcome(target)


PROBES = {
    "kill -9 mid-sweep, then resume": lambda p, r: kill_probe(p, r, "kill"),
    "Ctrl-C mid-sweep, then resume": lambda p, r: kill_probe(p, r, "int"),
    "three identical sweeps at once": concurrent_probe,
    "corrupt rows, then resume": corrupt_probe,
    "100 random bytes in the WAL, salvage, resume": damaged_wal_probe,
    "store cut to half its size, salvage, resume": truncated_probe,
    "100 random bytes in the WAL, all through a link, salvage, resume": linked_wal_probe,
    "another store's WAL beside the store, refused, moved aside, resume": foreign_wal_probe,
    "a killed sweep's WAL zeroed, refused, salvage without it, resume": zeroed_wal_probe,
    "a training group killed between its rows, then resume": group_kill_probe,
    "malformed command lines, each one line with status 2": malformed_probe,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", help="scratch folder (default: a temporary one)")
    parser.add_argument("--jobs", type=int, default=16, help="jobs per sweep")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="run the probes whose name has this text")
    parser.add_argument(
        "--ray", action="store_true", help="also the Ray cluster's faults (test_ray_faults.py)"
    )
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="testbed-faults-"))
    total = [0, 0]
    try:
        for n, (name, probe) in enumerate(PROBES.items()):
            if args.only not in name:
                continue
            lost, doubled = probe(Probe(folder, f"probe{n}", args.jobs), rng)
            total[0] += lost
            total[1] += doubled
            print(f"{name}: rows lost {lost}, doubled {doubled}", flush=True)
        ray = "the Ray head killed and a node lost mid-sweep"
        if args.ray and args.only in ray:
            lost, doubled = ray_probe()
            total[0] += lost
            total[1] += doubled
            print(f"{ray}: rows lost {lost}, doubled {doubled}", flush=True)
    finally:
        if not args.folder:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"all probes: rows lost {total[0]}, doubled {total[1]}, "
          f"faults not in one line with their status {len(NOT_ONE_LINE)}")  # fmt: skip
    return 0 if total == [0, 0] and not NOT_ONE_LINE else 1


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(TESTS)]
    sys.exit(main())
