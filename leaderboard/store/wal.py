"""The one thing SQLite does not say of a results file's write-ahead log (WAL): that it
holds committed rows SQLite will not read.

SQLite replays a WAL's frames up to the last commit before the first frame whose
checksum or salt fails, and takes a log whose header fails for an empty one: every
transaction after that point is dropped without a word, and the next write overwrites
it. Without this check 100 random bytes in a WAL showed 0 of a store's 127 rows and a
zeroed WAL showed none, and a sweep would have destroyed the rest
(tests/test_edge_faults.py::test_damage_in_the_wal_is_refused_and_salvaged_never_read_in_part,
tests/test_store_files.py::test_a_damaged_wal_is_found_through_a_symbolic_link and
::test_a_zeroed_wal_is_refused_not_read_as_an_empty_store fail without it).

So this module reads the log as SQLite does (its header, each frame's 24-byte header and
the running checksum) to count the commits past the point where SQLite stops; `replay`
writes a log's frames into a private copy of the database as a checkpoint would, past a
damaged one too, for `testbed salvage`. SQLite cannot be asked instead: its checkpoint
of a copy of the log needs the database's schema, so the whole file would be copied.
The format: https://www.sqlite.org/fileformat.html#the_write_ahead_log
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path
from typing import NamedTuple

MAGIC = (0x377F0682, 0x377F0683)  # the low bit: checksums of big-endian words
HEADER, FRAME_HEADER = 32, 24
MASK = 0xFFFFFFFF


class Frame(NamedTuple):
    offset: int
    page: int
    commit: int  # the database's size in pages after a commit; 0 for other frames
    salts: bytes


class Log(NamedTuple):
    data: bytes
    header_ok: bool  # SQLite reads it (else it reads no frame)
    page_size: int  # 0: unknown
    frames: list[Frame]  # the whole frames in the file
    commits: list[int]  # indexes of the commit frames of its current generation


def wal_path(database: str | os.PathLike) -> Path:
    path = Path(database)
    return path.with_name(path.name + "-wal")


def _page_size_ok(size: int) -> bool:
    return 512 <= size <= 65536 and size & (size - 1) == 0


def page_size_of(database: Path) -> int | None:
    """The page size in the database file's header (None: no readable header)."""
    try:
        with open(database, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    size = int.from_bytes(head[16:18], "big") if len(head) == 18 else 0
    size = 65536 if size == 1 else size
    return size if _page_size_ok(size) else None


def _checksum(data: bytes, s0: int, s1: int, big_endian: bool) -> tuple[int, int]:
    """SQLite's WAL checksum of `data` (pairs of 32-bit words) continued from (s0, s1)."""
    for x0, x1 in struct.iter_unpack(">II" if big_endian else "<II", data):
        s0 = (s0 + x0 + s1) & MASK
        s1 = (s1 + x1 + s0) & MASK
    return s0, s1


def _header_ok(data: bytes) -> bool:
    """Whether SQLite reads the log's header: magic, version, page size and checksum."""
    if len(data) < HEADER:
        return False
    magic, version, page_size = struct.unpack(">3I", data[:12])
    checksum = _checksum(data[:24], 0, 0, bool(magic & 1))
    return (
        magic in MAGIC
        and version == 3007000
        and _page_size_ok(page_size)
        and struct.pack(">2I", *checksum) == data[24:32]
    )


def read(database: Path) -> Log:
    """The WAL beside `database` as frames. The current generation is the header's; when
    the header fails, the first frame's that the next frame shares (the newest frames
    come first), and its page size the database's."""
    data = wal_path(database).read_bytes()
    header_ok = _header_ok(data)
    page_size = int.from_bytes(data[8:12], "big") if len(data) >= 12 else 0
    if not header_ok and not _page_size_ok(page_size):
        page_size = page_size_of(database) or 0
    step = FRAME_HEADER + page_size
    starts = range(HEADER, len(data) - step + 1, step) if page_size else ()
    frames = [Frame(o, *struct.unpack(">2I", data[o : o + 8]), data[o + 8 : o + 16])
              for o in starts]  # fmt: skip
    salts = data[16:24] if header_ok else None
    if not header_ok:
        pairs = zip(frames, frames[1:])
        salts = next((a.salts for a, b in pairs if a.salts == b.salts), None)
        salts = salts or (frames[0].salts if frames else None)
    commits = [i for i, f in enumerate(frames) if f.salts == salts and f.commit and f.page]
    return Log(data, header_ok, page_size, frames, commits)


def _replayed(log: Log) -> int:
    """How many frames of `log` SQLite replays: up to its last commit before the first
    frame whose salts or running checksum fail."""
    if not log.header_ok:
        return 0
    big, (s0, s1) = bool(log.data[3] & 1), struct.unpack(">2I", log.data[24:32])
    replayed = 0
    for i, frame in enumerate(log.frames):
        start = frame.offset
        s0, s1 = _checksum(log.data[start : start + 8], s0, s1, big)
        body = log.data[start + FRAME_HEADER : start + FRAME_HEADER + log.page_size]
        s0, s1 = _checksum(body, s0, s1, big)
        stored = log.data[start + 16 : start + 24]
        if frame.salts != log.data[16:24] or not frame.page or stored != struct.pack(">2I", s0, s1):
            break
        replayed = i + 1 if frame.commit else replayed
    return replayed


def _hidden(database: Path) -> tuple[str, str] | None:
    try:
        log = read(database)
    except OSError:
        return None
    if not log.data or (log.header_ok and not log.commits):
        return None
    replayed = _replayed(log)
    lost = [i for i in log.commits if i >= replayed]
    if lost:
        where = f"frame {replayed + 1} of {len(log.frames)}" if log.header_ok else "its header"
        return "damaged", (
            f"its WAL file holds {len(lost)} committed transaction(s) that SQLite would drop "
            f"unread ({where} is damaged)"
        )
    if log.header_ok:
        return None
    what = "zeros" if not any(log.data) else "bytes"
    return "unreadable", f"holds {len(log.data):,} {what} but no WAL header that SQLite reads"


def hidden_rows(database: Path, retries: int = 2) -> tuple[str, str] | None:
    """('damaged', why) when the WAL beside `database` holds committed transactions that
    SQLite would drop unread (past a damaged frame or header); ('unreadable', why) when
    it holds bytes but no log SQLite reads (zeroed, overwritten, cut inside its header);
    else None. A writer appending or starting a log at that moment can look like either
    for an instant: the finding must hold when read again."""
    for attempt in range(retries + 1):
        found = _hidden(database)
        if found is None or attempt == retries:
            return found
        time.sleep(0.1)
    return None


def replay(database: Path) -> None:
    """Writes the WAL beside `database` (a private copy) into it as SQLite's checkpoint
    would: every frame of the log's current generation in order up to its last commit,
    those past a damaged frame too (a damaged page then costs only the rows it holds),
    the file cut to the size that commit gives; then removes the log (left as it is when
    it holds no commit)."""
    log = read(database)
    if not log.commits:
        return
    last = log.frames[log.commits[-1]]
    size = log.page_size
    kept = [f for f in log.frames[: log.commits[-1] + 1] if f.salts == last.salts]
    with open(database, "r+b") as f:
        for frame in kept:
            if 0 < frame.page <= last.commit:
                f.seek((frame.page - 1) * size)
                start = frame.offset + FRAME_HEADER
                f.write(log.data[start : start + size])
        f.truncate(last.commit * size)
        f.seek(24)
        counter = f.read(4)  # the header's page count holds for this change counter
        f.seek(28)
        f.write(last.commit.to_bytes(4, "big"))
        f.seek(92)
        f.write(counter)
    wal_path(database).unlink()
