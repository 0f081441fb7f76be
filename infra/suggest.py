"""Did-you-mean for user input: the closest known word, and why a near-identical word still
did not match (a lookalike character, shown with its code point)."""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The known word nearest to ``word``: among difflib's close matches, the fewest edits
    (difflib alone breaks a tie of its ratio by the larger string: 'efx' -> 'fsx', not 'efa')."""
    matches = difflib.get_close_matches(word, sorted(choices), n=5, cutoff=0.6)
    return min(matches, key=lambda match: edits(word, match), default=None)


def edits(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions from ``a`` to ``b``."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (x != y))
    return row[-1]


def odd_characters(word: str) -> str:
    """Non-ASCII characters of ``word`` with their code points, e.g. ``(U+043E CYRILLIC SMALL
    LETTER O)`` for a Cyrillic o; empty when the word is plain ASCII."""
    odd = []
    for char in dict.fromkeys(word):
        if not char.isascii() or not char.isprintable():
            name = unicodedata.name(char, "unnamed character")
            odd.append(f"{char!r} (U+{ord(char):04X} {name})")
    return ", ".join(odd)


def suggest(word: str, choices: Iterable[str]) -> str:
    match = closest(word, choices)
    return did_you_mean(word, match) if match else ""


def did_you_mean(word: str, match: str) -> str:
    """``did you mean 'match'? `` (with any lookalike character of ``word`` named)."""
    odd = odd_characters(word)
    why = f" ({word!r} contains {odd})" if odd else ""
    return f"did you mean '{match}'{why}? "
