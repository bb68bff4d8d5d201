"""The command line's index of the registries: `testbed list ...` and the errors of a
mistyped agent, setting, problem family or sweep, or of a setting's value of the wrong
type, answered without importing JAX, torch or sbi (a tenth of a second instead of
seconds).

The index is built from the registries themselves, right after a command has imported the
whole stack (before any `--import`), and kept in a cache file whose name is a key of what
could change them: the path, size and modification time of every file of the packages
`agents`, `generative`, `testbed`, `leaderboard` and `experiments`, the Python that runs,
the `TESTBED_*` settings and the site-packages folders (a package installed or removed
changes them). A key without its file (a first run, an edit, an upgrade) means no index:
the command imports everything, as it always did, and writes one. A command with
`--import`, or with agent plugins installed (entry points `testbed.agents`), always takes
the whole way. The cache folder is `TESTBED_CATALOG` (`off`: none), else
`$XDG_CACHE_HOME/testbed/catalog`, else `~/.cache/testbed/catalog`.

The variables are read by `testbed.settings`, whose file this module loads by its path
when the testbed is not imported yet (it imports only the standard library): the command
reads its environment once, here, and keeps that snapshot in force once the stack is loaded.

An answer given here is the one the whole way gives (`tests/test_fast_answers.py` compares
them): its errors are made by the library's own functions (`testbed/names.py`, the words of
an unknown name, setting, `--set` key or problem id; `leaderboard/execution/seeds.py`, the
reading of `--seeds`), loaded from their files; an input this index cannot judge alone (a
value out of its range, a problem id of a known family, a seed) takes the whole way.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.comma_lists import LISTS, split_items

PACKAGES = ("agents", "generative", "testbed", "leaderboard", "experiments")
FORMAT = 2  # bumped when the index's layout changes
KEEP = 8  # index files kept in the folder (the newest)
LIST_KINDS = ("agents", "problems", "sweeps", "metrics")
PLUGIN_GROUP = "testbed.agents"
# where a name the registries lack may be registered: files here, scanned for the hint
HINT_FOLDERS = (".", "examples")
HINT_MAX_FILES = 200
HINT_MAX_BYTES = 1_000_000  # a file larger is not read
HINT_MAX_TOTAL = 5_000_000  # nor any after this many bytes


# ----- the key and the cache file


def _package_dirs() -> list[Path]:
    """The folders the packages import from (found without importing them)."""
    out = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            out.append(Path(location))
    return out


def key(chosen: Any = None) -> str:
    """A hash of what the registries are built from (see the module's docstring), with the
    settings `chosen` (default: those in force, `environment()`)."""
    chosen = environment() if chosen is None else chosen
    h = hashlib.sha256(f"{FORMAT}\0{sys.executable}\0{sys.version}\0".encode())
    for name, value in chosen.values:  # sorted by name
        if name.startswith("TESTBED_") and name != CATALOG_ENV:
            h.update(f"{name}={value}\0".encode())
    for entry in sys.path:  # a package installed or removed (an optional agent's library)
        if os.path.basename(entry) in ("site-packages", "dist-packages"):
            try:
                h.update(f"{entry}\0{os.stat(entry).st_mtime_ns}\0".encode())
            except OSError:
                h.update(f"{entry}\0-\0".encode())
    for folder in _package_dirs():
        h.update(f"{folder}\0".encode())
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for f in sorted(files):
                try:
                    st = os.stat(os.path.join(root, f))
                except OSError:
                    continue
                h.update(f"{os.path.join(root, f)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:32]


def cache_dir(chosen: Any = None) -> Path | None:
    """The folder of the index files, or None (`TESTBED_CATALOG=off`), as the settings
    `chosen` (default: those in force) say (`testbed.settings.Settings.catalog`)."""
    return (environment() if chosen is None else chosen).catalog


def _plugins_installed() -> bool:
    import importlib.metadata

    try:
        return bool(importlib.metadata.entry_points(group=PLUGIN_GROUP))
    except Exception:  # damaged metadata: the whole way says so
        return True


def load(chosen: Any = None) -> dict[str, Any] | None:
    """The index for this installation's state, or None (none written yet, or off)."""
    chosen = environment() if chosen is None else chosen
    folder = cache_dir(chosen)
    if folder is None:
        return None
    path = folder / f"{key(chosen)}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or _plugins_installed():
        return None
    return data


def build(list_rows: Callable[[str, bool], tuple[list[str], list[list[Any]]]]) -> dict:
    """The index of the registries as they are now (the stack imported, no user module):
    `list_rows(kind, as_json)` gives `testbed list KIND`'s columns and rows."""
    import dataclasses

    import agents
    import generative
    from testbed.errors import MAX_LISTED

    entries = {n: agents.AGENTS.get(n) for n in agents.names()}
    return {
        "format": FORMAT,
        "max_listed": MAX_LISTED,
        "agents": {
            n: {
                "fields": sorted(f.name for f in dataclasses.fields(e.config_cls)),
                "settings": _settings(e.config_cls),
            }
            for n, e in entries.items()
        },
        "families": list(generative.FAMILIES.names()),
        "sweeps": {n: len(generative.sweep_ids(n)) for n in generative.sweep_names()},
        "list": {
            kind: {mode: list_rows(kind, mode == "json") for mode in ("json", "table")}
            for kind in LIST_KINDS
        },
    }


PLAIN = {int: "int", float: "float", bool: "bool", str: "str"}


def _settings(config_cls: type) -> dict[str, dict[str, Any]]:
    """Each setting `--set` takes (`testbed.config.field_types`) with what the index needs
    to refuse a value of the wrong type: its plain type (int, float, bool, str; None for
    others, whose values the config judges), what `_coerce` says it allows and what inf
    means for it (`testbed.config.INF`; None: inf is refused)."""
    import dataclasses

    from testbed.config import INF, _describe, field_types

    inf = {f.name: f.metadata.get(INF) for f in dataclasses.fields(config_cls)}
    return {
        name: {"type": PLAIN.get(tp), "allowed": _describe(tp), "inf": inf.get(name)}
        for name, tp in field_types(config_cls).items()
    }


def write(data: dict, chosen: Any = None) -> Path | None:
    """Writes the index under this state's key (atomically); None when there is no
    folder or it cannot be written (the index is a cache: nothing fails without it)."""
    chosen = environment() if chosen is None else chosen
    folder = cache_dir(chosen)
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{key(chosen)}.json"
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
        old = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)[:-KEEP]
        for stale in old:  # states of the source that have gone (several Pythons: KEEP)
            stale.unlink(missing_ok=True)
    except OSError:
        return None
    return path


# ----- messages, as the registries word them (testbed.errors, testbed.registry)


def _load_file(package: str, module: str):
    """A module of ours that imports only the standard library, loaded from its file
    (`module` dotted below `package`): importing it by name would first import its package
    (the testbed's imports JAX)."""
    folder = importlib.util.find_spec(package).submodule_search_locations[0]
    path = Path(folder, *module.split(".")).with_suffix(".py")
    name = f"_catalog_{module.replace('.', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded  # as an import does (a dataclass looks its module up)
    spec.loader.exec_module(loaded)
    return loaded


_names = _load_file("testbed", "names")  # the registries' words for names
_settings_file = _load_file("testbed", "settings")  # read alike before the stack loads
CATALOG_ENV = _settings_file.CATALOG


def _settings_module():
    """testbed.settings: the module itself once the testbed is imported, else its file
    loaded alone (`_settings_file`)."""
    return sys.modules.get("testbed.settings") or _settings_file


def environment() -> Any:
    """The settings in force (`testbed.settings.current()`): those a command installed,
    else the environment's, read now (a `testbed.settings.Settings`)."""
    return _settings_module().current()


def unknown_name(field: str, name: str, names: list[str], max_listed: int) -> str:
    """`testbed.registry.unknown_name(field, name, names)`'s message."""
    return _names.unknown_name(field, name, names, max_listed)


# ----- the hint: a file here registers the name


REGISTERS = {
    "agent": r"\bregister",
    "problem family": r"\bregister_family",
    "sweep": r"\bregister_sweep",
}


def import_hint(kind: str, name: str, cwd: str | Path | None = None) -> str:
    """'; F has register('NAME'): add --import F' for the first .py file F in the working
    directory or its examples/ whose text registers `name` as a `kind` (an agent, a problem
    family, a sweep), else ''. The text is read, not run: the hint says what it saw."""
    if kind not in REGISTERS or not isinstance(name, str) or not name:
        return ""
    pattern = re.compile(REGISTERS[kind] + r"\(\s*(['\"])" + re.escape(name) + r"\1")
    base = Path(cwd or os.getcwd())
    seen = read = 0
    for folder in HINT_FOLDERS:
        try:
            files = sorted(p for p in (base / folder).glob("*.py") if p.is_file())
        except OSError:
            continue
        for path in files:
            seen += 1
            if seen > HINT_MAX_FILES:
                return ""
            try:
                size = path.stat().st_size
                if size > HINT_MAX_BYTES or read + size > HINT_MAX_TOTAL:
                    continue
                read += size
                text = path.read_text(errors="replace")
            except OSError:
                continue
            match = pattern.search(text)
            if match:
                shown = os.path.relpath(path, base)
                call = REGISTERS[kind].removeprefix(r"\b")
                return f"; {shown} has {call}({name!r}): add --import {shown}"
    return ""


# ----- answers


class Answer(Exception):
    """An error the index can give: its one line."""


def _sets(pairs: list[str] | None) -> dict[str, str] | None:
    """--set pairs as the command line parses them, or None when one is malformed (its
    error is the whole way's)."""
    out = {}
    for pair in pairs or []:
        if "=" not in pair or not pair.split("=", 1)[0].strip():
            return None
        k, v = pair.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _unknown_agent(index: dict, name: str) -> Answer:
    """The error of an agent name the index lacks."""
    agents = sorted(index["agents"])
    return Answer(
        unknown_name("agent", name, agents, index["max_listed"]) + import_hint("agent", name)
    )


def _family(index: dict, problem_id: str) -> bool:
    """Raises the error of an id whose family is unknown; True when it is known (the id
    itself is the family's to judge)."""
    families = index["families"]
    if not isinstance(problem_id, str) or "/" not in problem_id:
        raise Answer(_names.malformed_problem_id(problem_id, families))
    family = problem_id.split("/", 1)[0]
    if family not in families:
        raise Answer(
            unknown_name("problem family", family, families, index["max_listed"])
            + import_hint("problem family", family)
        )
    return True


def check_run(index: dict, args: Any) -> None:
    """`testbed run`'s first error, when the index can tell it; else returns."""
    sets = _sets(args.set)
    if sets is None or _sets(args.option) is None:
        return  # the whole way's error
    if args.metrics:  # refused before the agent is looked at
        split_items(args.metrics, "--metrics", what=LISTS["--metrics"], error=Answer)
    if args.agent not in index["agents"]:
        raise _unknown_agent(index, args.agent)
    settings = index["agents"][args.agent]["settings"]
    if args.seed is not None or "seed" in sets:
        return  # a seed is checked against the agent's code
    for name, value in sets.items():  # as testbed.config.coerce_fields, in order
        if name not in settings:
            raise Answer(_names.unknown_setting(f"agent {args.agent}: ", name, settings))
        refused = _refused(settings[name], value)
        if refused is None:
            return  # a value the index cannot judge: the config's
        if refused:
            raise Answer(f"agent {args.agent}: {name}: got {value!r}; allowed: {refused}")
    if sets or args.option:
        return  # the config's own checks (ranges, choices), then the options'
    _family(index, args.problem)


def _refused(setting: dict[str, Any], text: str) -> str | None:
    """What a setting allows when the command-line `text` is not a value of its plain type
    (as testbed.config's `_coerce` and its finiteness check), '' when it is one, None when
    the index cannot tell (a type that is not int, float, bool or str)."""
    kind, allowed = setting["type"], setting["allowed"]
    if kind == "str":
        return ""
    if kind == "bool":
        return "" if text.lower() in ("true", "false", "1", "0", "yes", "no") else allowed
    if kind not in ("int", "float"):
        return None
    try:
        number = float(text)
    except ValueError:
        return allowed
    if kind == "int":
        return "" if number.is_integer() else allowed
    if math.isnan(number) or (math.isinf(number) and setting["inf"] is None):
        also = f", or inf: {setting['inf']}" if setting["inf"] is not None else ""
        return allowed.replace("number", "finite number") + also
    return ""


MAX_SEEDS_HERE = 1000  # more seeds: the whole way counts them
_seeds = _load_file("leaderboard", "execution.seeds")  # the library's reading of --seeds


def _few_seeds(text: str) -> int | None:
    """How many seeds `text` names when they are seeds and few (as the library reads them,
    `leaderboard.execution.seeds.AgentSeeds`), else None."""
    if not isinstance(text, str):
        return None
    seeds = _seeds.AgentSeeds.parse(text)
    if seeds.early is not None or seeds.refused is not None:
        return None
    return seeds.count if 0 < seeds.count <= MAX_SEEDS_HERE else None


def check_sweep(index: dict, args: Any, max_jobs: int) -> None:
    """`testbed sweep`'s first error, when the index can tell it; else returns."""
    sets = _sets(args.set)
    if sets is None or args.option or not args.sweep or args.problem:
        return  # an error said before --agent's, or problem ids: their families' to judge
    names = split_items(args.agent or [], "--agent", what=LISTS["--agent"], error=Answer)
    seeds = _few_seeds(args.seeds)
    if seeds is None or "seed" in sets:
        return
    if args.sweep not in index["sweeps"]:
        raise Answer(
            unknown_name("sweep", args.sweep, sorted(index["sweeps"]), index["max_listed"])
            + import_hint("sweep", args.sweep)
        )
    size = len(names) * index["sweeps"][args.sweep] * seeds
    if args.configs == "default" and (size > max_jobs or not size):
        return  # the size is refused first (a whole sweep's configs: counted by the agents)
    if unknown := next((n for n in names if n not in index["agents"]), None):
        raise _unknown_agent(index, unknown)
    fields = {n: index["agents"][n]["fields"] for n in names}
    error = _names.unused_override(fields, sets)
    if error and args.configs == "default":  # (a sweep of configs is sized first)
        raise Answer(error)


def fast_answer(
    args: Any, *, max_jobs: int, show: Callable[..., None], chosen: Any = None
) -> int | None:
    """The command's answer from the index: `list` printed (by `show(kind, cols, rows,
    as_json)`), 0; an error printed, 2; None when the index cannot answer (the command
    then takes the whole way). `chosen`: the command's settings (default: in force)."""
    if getattr(args, "imports", None) or args.command not in ("list", "run", "sweep"):
        return None
    chosen = environment() if chosen is None else chosen
    if args.command != "list" and chosen.get(_settings_module().PROGRESS):
        return None  # checked (and refused if bad) before the command runs
    index = load(chosen)
    if index is None:
        return None
    try:
        if args.command == "list":
            cols, rows = index["list"][args.what]["json" if args.json else "table"]
            show(args.what, cols, rows, args.json)
            return 0
        if args.command == "run":
            check_run(index, args)
        else:
            check_sweep(index, args, max_jobs)
    except Answer as e:
        print(f"testbed: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError):  # an index of another layout: not used
        return None
    return None
