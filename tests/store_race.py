"""Opens new results stores from many processes at once; prints one line per open.

Usage: python store_race.py FOLDER PROCESSES FILES. The parent imports the store once,
then forks PROCESSES children; for each of FILES new paths, all children wait at a
barrier and open the same path in write mode together. Each open prints `ok` or the
error's message.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from pathlib import Path

from leaderboard.store import ResultsStore
from testbed.errors import InputError


def _child(folder: str, files: int, barrier, out) -> None:
    for i in range(files):
        barrier.wait()
        try:
            ResultsStore(Path(folder) / f"r{i}.db").close()
            out.put("ok")
        except InputError as e:
            out.put(str(e))


def main() -> None:
    folder, processes, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ctx = mp.get_context("fork")  # no JAX computation has run in this process
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    children = [
        ctx.Process(target=_child, args=(folder, files, barrier, out)) for _ in range(processes)
    ]
    for c in children:
        c.start()
    for _ in range(processes * files):
        print(out.get(timeout=120))
    for c in children:
        c.join(30)


if __name__ == "__main__":
    main()
