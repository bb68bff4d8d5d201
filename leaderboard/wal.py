"""A results file's write-ahead log (WAL): whether damage hides committed rows, and repair.

SQLite replays a WAL's frames from the start and stops at the first frame whose checksum
(or salt) does not match: every transaction committed after a damaged frame is dropped
without a word, and the next write overwrites it. `lost_commits` finds such transactions
(commit frames of the log's current generation after the point where SQLite stops), so a
store can refuse the file before reading a part of it as if it were all of it; `repair`
rewrites a private copy's log with fresh checksums so that `salvage` reads every frame
that is still there (a damaged page then costs only the rows it holds).

The format (https://www.sqlite.org/fileformat.html#the_write_ahead_log): a 32-byte header
(magic, version, page size, checkpoint sequence, two salts, a checksum of the first 24
bytes), then frames of a 24-byte header (page number, database size after a commit or 0,
the two salts, a running checksum) and one page each.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import time
from pathlib import Path

MAGIC = (0x377F0682, 0x377F0683)  # the low bit: checksums of big-endian words
VERSION = 3007000
HEADER, FRAME_HEADER = 32, 24
MASK = 0xFFFFFFFF


@dataclasses.dataclass(frozen=True)
class Frame:
    offset: int
    page: int
    commit: int  # database size in pages after a commit; 0 for other frames
    salts: tuple[int, int]
    checksum: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Scan:
    """What SQLite reads of a WAL and what it drops."""

    frames: int  # whole frames in the file
    replayed: int  # frames SQLite replays (up to its last commit before a bad frame)
    lost_commits: int  # commit frames of this generation that SQLite does not reach
    header_ok: bool


def wal_path(database: str | os.PathLike) -> Path:
    path = Path(database)
    return path.with_name(path.name + "-wal")


def page_size_of(database: Path) -> int | None:
    """The page size in the database file's header (None: no readable header)."""
    try:
        with open(database, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if len(head) < 18:
        return None
    size = struct.unpack(">H", head[16:18])[0]
    size = 65536 if size == 1 else size
    return size if _valid_page_size(size) else None


def log_page_size(wal: Path) -> int | None:
    """The page size a WAL file's valid header gives (None: no file, or no valid header)."""
    try:
        with open(wal, "rb") as f:
            valid, _, page_size, _, _ = _header(f.read(HEADER))
    except OSError:
        return None
    return page_size if valid else None


def _valid_page_size(size: int) -> bool:
    return 512 <= size <= 65536 and size & (size - 1) == 0


def _checksum(data: bytes, s0: int, s1: int, big_endian: bool) -> tuple[int, int]:
    """SQLite's WAL checksum of `data` (a multiple of 8 bytes) continued from (s0, s1).

    The recurrence s0 += x[2i] + s1, s1 += x[2i+1] + s0 is linear: with numpy it is summed
    in one pass as powers of [[1, 1], [1, 2]] (mod 2^32, from uint64 arithmetic, which
    wraps at a multiple of 2^32)."""
    import numpy as np

    words = np.frombuffer(data, dtype=">u4" if big_endian else "<u4").astype(np.uint64)
    a, b = words[0::2], words[1::2]
    n = len(a)
    if n == 0:
        return s0, s1
    p00, p01, p10, p11 = _powers(n)  # M^(n-1-i) for step i
    u1 = a + b
    c0 = int((a * p00 + u1 * p01).sum(dtype=np.uint64)) & MASK
    c1 = int((a * p10 + u1 * p11).sum(dtype=np.uint64)) & MASK
    q00, q01, q10, q11 = _power(n)  # M^n applied to the starting state
    return (q00 * s0 + q01 * s1 + c0) & MASK, (q10 * s0 + q11 * s1 + c1) & MASK


_POWERS: dict[int, tuple] = {}


def _power(n: int) -> tuple[int, int, int, int]:
    """[[1, 1], [1, 2]]^n mod 2^32 as (m00, m01, m10, m11)."""
    result, base = (1, 0, 0, 1), (1, 1, 1, 2)
    while n:
        if n & 1:
            result = _mul(result, base)
        base = _mul(base, base)
        n >>= 1
    return result


def _mul(x: tuple, y: tuple) -> tuple[int, int, int, int]:
    a, b, c, d = x
    e, f, g, h = y
    return ((a * e + b * g) & MASK, (a * f + b * h) & MASK, (c * e + d * g) & MASK,
            (c * f + d * h) & MASK)  # fmt: skip


def _powers(n: int):
    """Arrays of the entries of M^(n-1-i), i = 0..n-1 (cached per length)."""
    if n not in _POWERS:
        import numpy as np

        out = np.empty((n, 4), dtype=np.uint64)
        m = (1, 0, 0, 1)
        for k in range(n):
            out[n - 1 - k] = m
            m = _mul(m, (1, 1, 1, 2))
        _POWERS[n] = tuple(out[:, j].copy() for j in range(4))
    return _POWERS[n]


def _frames(data: bytes, page_size: int) -> list[Frame]:
    out = []
    size = FRAME_HEADER + page_size
    for offset in range(HEADER, len(data) - size + 1, size):
        page, commit, s1, s2, c1, c2 = struct.unpack(">6I", data[offset : offset + FRAME_HEADER])
        out.append(Frame(offset, page, commit, (s1, s2), (c1, c2)))
    return out


def _header(data: bytes) -> tuple[bool, int, int, tuple[int, int], int]:
    """(valid, magic, page size, salts, checkpoint sequence) of a WAL header."""
    if len(data) < HEADER:
        return False, 0, 0, (0, 0), 0
    magic, version, page_size, sequence, s1, s2, c1, c2 = struct.unpack(">8I", data[:HEADER])
    valid = magic in MAGIC and version == VERSION and _valid_page_size(page_size)
    if valid:
        valid = _checksum(data[:24], 0, 0, bool(magic & 1)) == (c1, c2)
    return valid, magic, page_size, (s1, s2), sequence


def _generation(frames: list[Frame]) -> tuple[int, int] | None:
    """The salts of the log's current generation when its header is unreadable: those of
    the first frame whose salts the next frame shares (the newest frames come first)."""
    for first, second in zip(frames, frames[1:]):
        if first.salts == second.salts:
            return first.salts
    return frames[0].salts if frames else None


def scan_bytes(data: bytes, page_size_hint: int | None = None) -> Scan:
    valid, magic, page_size, salts, _ = _header(data)
    if not valid:
        page_size = page_size if _valid_page_size(page_size) else page_size_hint
        if not page_size:
            return Scan(0, 0, 0, False)
        frames = _frames(data, page_size)
        current = _generation(frames)
        lost = sum(1 for f in frames if f.salts == current and f.commit and f.page)
        return Scan(len(frames), 0, lost, False)
    frames = _frames(data, page_size)
    big = bool(magic & 1)
    s0, s1 = struct.unpack(">2I", data[24:32])
    replayed, stop = 0, len(frames)
    for i, frame in enumerate(frames):
        start = frame.offset
        s0, s1 = _checksum(data[start : start + 8], s0, s1, big)
        body = data[start + FRAME_HEADER : start + FRAME_HEADER + page_size]
        s0, s1 = _checksum(body, s0, s1, big)
        if frame.salts != salts or frame.page == 0 or (s0, s1) != frame.checksum:
            stop = i
            break
        if frame.commit:
            replayed = i + 1
    lost = sum(1 for f in frames[stop:] if f.salts == salts and f.commit and f.page)
    return Scan(len(frames), replayed, lost, True)


def scan(database: str | os.PathLike) -> Scan | None:
    """The WAL of `database` as SQLite would read it (None: no WAL, or an empty one)."""
    path = wal_path(database)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) <= HEADER:
        return None
    return scan_bytes(data, page_size_of(Path(database)))


def damage(database: str | os.PathLike, retries: int = 2) -> str | None:
    """Why the WAL of `database` hides committed rows (transactions after a damaged
    frame), or None. A writer appending at that moment can look like damage for an
    instant: the finding must hold when read again."""
    found = None
    for attempt in range(retries + 1):
        result = scan(database)
        if result is None or not result.lost_commits:
            return None
        found = result
        if attempt < retries:
            time.sleep(0.1)
    where = (
        "its header is damaged"
        if not found.header_ok
        else f"frame {found.replayed + 1} of {found.frames} is damaged"
    )
    return (
        f"its WAL file holds {found.lost_commits} committed transaction(s) that SQLite "
        f"would drop unread ({where})"
    )


def repair(wal: Path, page_size_hint: int | None) -> int:
    """Rewrites the WAL file `wal` (a private copy) so that SQLite replays every frame of
    its current generation that is still there: a fresh header, the frames with that
    generation's salts in their order, and checksums computed anew. Returns the number of
    frames kept (0: nothing to repair; the file is then left as it is)."""
    data = wal.read_bytes()
    valid, magic, page_size, salts, sequence = _header(data)
    if not valid:
        page_size = page_size if _valid_page_size(page_size) else page_size_hint
        if not page_size:
            return 0
        frames = _frames(data, page_size)
        salts = _generation(frames) or (0, 0)
    else:
        frames = _frames(data, page_size)
    kept = [f for f in frames if f.salts == salts and 0 < f.page < 2**31]
    last_commit = max((i for i, f in enumerate(kept) if f.commit), default=-1)
    kept = kept[: last_commit + 1]
    if not kept:
        return 0
    magic = MAGIC[0]  # little-endian checksums: SQLite reads either
    head = struct.pack(">6I", magic, VERSION, page_size, sequence, *salts)
    s0, s1 = _checksum(head, 0, 0, False)
    out = [head + struct.pack(">2I", s0, s1)]
    for frame in kept:
        first = struct.pack(">2I", frame.page, frame.commit)
        body = data[frame.offset + FRAME_HEADER : frame.offset + FRAME_HEADER + page_size]
        s0, s1 = _checksum(first, s0, s1, False)
        s0, s1 = _checksum(body, s0, s1, False)
        out.append(first + struct.pack(">4I", *salts, s0, s1) + body)
    wal.write_bytes(b"".join(out))
    return len(kept)


def unreadable(database: str | os.PathLike, retries: int = 2) -> str | None:
    """Why the WAL of `database` holds bytes but no log SQLite reads (zeroed, cut inside
    its header, overwritten), or None. SQLite takes such a file for an empty log: every
    row committed to it is gone without a word, and the next write replaces the file.
    Checked after `damage` (a damaged header with frames behind it is damage)."""
    path = wal_path(database)
    for attempt in range(retries + 1):
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if not data or _header(data)[0]:
            return None
        if attempt < retries:  # a writer starting a log writes its header first
            time.sleep(0.1)
    what = "zeros" if not any(data) else "bytes"
    return f"holds {len(data):,} {what} but no WAL header that SQLite reads"
