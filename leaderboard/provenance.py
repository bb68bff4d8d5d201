"""What a result is made with: the package versions and the source's git commit.

Both the worker (each job's `versions`) and the results store (the file's `created_by`)
record them; this module imports nothing of ours, so either may.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

_VERSIONS: dict[str, str] | None = None


def versions() -> dict[str, str]:
    """Versions that decide whether numbers are comparable (cached per process)."""
    global _VERSIONS
    if _VERSIONS is None:
        from importlib import metadata

        out = {"python": platform.python_version()}
        for dist in ("testbed", "jax", "jaxlib", "numpy", "dm-haiku", "torch", "sbi"):
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
        commit = source_commit()
        if commit:
            out["testbed_commit"] = commit
        _VERSIONS = out
    return dict(_VERSIONS)


def source_commit(folder: str | os.PathLike | None = None) -> str | None:
    """The git commit that testbed's source (or `folder`) is checked out at, with "-dirty"
    when tracked files differ from it; None when it is not tracked by git (an installed
    package), so a result names the code that made it."""
    where = Path(folder) if folder is not None else Path(__file__).resolve().parent

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True,
                              timeout=10, check=False)  # fmt: skip

    try:
        if git("ls-files", "--error-unmatch", "--", ".").returncode != 0:
            return None
        head = git("rev-parse", "--short", "HEAD")
        if head.returncode != 0 or not head.stdout.strip():
            return None
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if changed.stdout.strip() else "")
