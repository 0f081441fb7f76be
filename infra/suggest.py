"""Did-you-mean for user input: the closest known word, and why a near-identical word still
did not match (a lookalike character, shown with its code point)."""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return match[0] if match else None


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
    if not match:
        return ""
    odd = odd_characters(word)
    why = f" ({word!r} contains {odd})" if odd else ""
    return f"did you mean '{match}'{why}? "
