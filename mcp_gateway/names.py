"""The names a caller slips on (a tool's, a prompt's, a value of a closed list): which one it
meant, and how a name that is none of them is refused, the same for a tool and a prompt."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from memories import bounds
from memories.errors import did_you_mean


def slipped_from(typed: str, names: Iterable[str]) -> list[str]:
    """The one of `names` that `typed` is a slip of ('add_member'), or the start of ('accept'
    for 'accept_proposal'), case-folded; [] when none is near."""
    typed, names = typed.lower(), list(names)
    return (
        difflib.get_close_matches(typed, names, n=1, cutoff=0.75)
        or [name for name in names if len(typed) >= 4 and name.startswith(typed)][:1]
    )


def unknown_name(kind: str, name: str, known: Iterable[str]) -> str:
    """`Unknown tool: 'serch'; did you mean 'search'?`: the name quoted and cut as every name a
    caller made up, and the known one it slips from when one is near."""
    hint = did_you_mean(slipped_from(name, known))
    return f"Unknown {kind}: {bounds.shown_key(name)!r}" + (f"; {hint}" if hint else "")
