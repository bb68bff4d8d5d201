"""A comma-separated option's items, read one way by the `testbed` command, its index of
the registries (`experiments.catalog`) and every experiment script: an empty item (`a,,b`,
`a,`) or one given twice is refused, naming the option and what it takes, never dropped
or run twice.

Imports only the standard library when it is loaded (the testbed's errors when one is
raised): the index answers from here before the stack loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# what each comma-separated option of `testbed` takes, said alike by the command and its index
LISTS = {
    "--agent": "agent names (testbed list agents)",
    "--problem": "problem ids such as coin/0,coin/1",
    "--metrics": "metric names (testbed list metrics), or default",
    "--import": "module names or .py files",
}


def split_items(
    text: str | Sequence[str], field: str, cast: Any = str, what: str = "names", error: Any = None
) -> list:
    """A comma-separated option's items (each cast by `cast`), each given once, else an
    InputError naming `field` and saying `what` it takes: an empty item (`a,,b`, `a,`) or
    one given twice is refused, never dropped or run twice. For an open set (problem ids,
    sizes), whose items are judged where they are used; `split_choices` judges a closed one.
    `text`: a list for an option given several times (`--agent a --agent b,c`), read as
    its texts joined by commas. `error`: the exception raised instead (the command line's
    index, which loads no library, raises its own)."""
    text = text if isinstance(text, str) else ",".join(text)
    texts = [t.strip() for t in text.split(",")]
    try:
        items = [cast(t) for t in texts if t]
    except ValueError:
        items = []
    twice = next((i for n, i in enumerate(items) if i in items[:n]), None)
    listed = f"a comma-separated list of {what}"
    if not items:  # nothing, or an item that is not a `cast`
        fault = f"{field}: got {text!r}; allowed: {listed}"
    elif "" in texts:
        fault = f"{field}: got {text!r}, which has an empty item; allowed: {listed}"
    elif twice is not None:
        fault = f"{field}: got {text!r}, which names {twice} twice; allowed: each once, {listed}"
    else:
        return items
    if error is None:
        from testbed.errors import InputError as error
    raise error(fault)


def split_choices(text: str, field: str, allowed: Sequence[Any], cast: Any = str) -> list:
    """A comma-separated option's items, each one of `allowed` (cast by `cast`) and given
    once, else an InputError naming `field`, the closest allowed name and every allowed one
    (an empty item, `mlp,,bbb`, or one given twice is refused: `split_items`)."""
    shown = ", ".join(map(str, allowed))
    items = split_items(text, field, cast, shown)
    bad = [i for i in items if i not in allowed]
    if bad:
        from testbed.config import did_you_mean
        from testbed.errors import InputError

        near = did_you_mean(bad[0], map(str, allowed))
        which = f", which names {str(bad[0])!r}" if len(items) > 1 else ""  # the one at fault
        raise InputError(f"{field}: got {text!r}{which}{near}; allowed: a comma-separated list "
                         f"of {shown}")  # fmt: skip
    return items
