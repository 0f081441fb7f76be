"""Whose code failed: a frame is this package's, a library's (the standard library, site-packages)
or the user's (anything else: their Pulumi program and its own modules).

An exception out of a user's program is theirs when the innermost frame that is not a library's
is theirs (their raise, their call into pulumi, their SyntaxError); it is ours when that frame is
this package's. Only ours is reported as a bug in gpuc."""

from __future__ import annotations

import inspect
import sys
import sysconfig
import traceback
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Literal

from gpu_cluster.infra.problems import INPUT, CommandError

Owner = Literal["ours", "library", "user"]

# The rooms under the import name (in a checkout, links to the top-level folders; in a wheel,
# plain subfolders): frames are compared by resolved path.
ROOMS = ("components", "infra", "policy")
MAX_FRAMES = 6  # the user's frames a message shows, innermost last


@cache
def our_folders() -> tuple[Path, ...]:
    package = Path(sys.modules["gpu_cluster"].__file__ or __file__).resolve().parent
    return tuple(sorted({package, *((package / room).resolve() for room in ROOMS)}))


@cache
def library_folders() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(sorted({Path(paths[name]).resolve() for name in names if name in paths}))


@cache
def owner(filename: str) -> Owner:
    """Whose code a frame's file is."""
    if not filename or filename.startswith("<"):  # <frozen importlib._bootstrap>, <string>
        return "library"
    path = Path(filename).resolve()
    if any(path.is_relative_to(folder) for folder in our_folders()):
        return "ours"
    if any(path.is_relative_to(folder) for folder in library_folders()):
        return "library"
    return "user"


def site(filename: str, line: int | None) -> str:
    return f"{filename}:{line}" if line else filename


def first_user_site(frames: Iterable[tuple[str, int | None]]) -> str | None:
    """The first (file, line) of ``frames`` (innermost first) that is the user's."""
    return next((site(f, line) for f, line in frames if owner(f) == "user"), None)


def caller_site() -> str | None:
    """Where the user's code called into this package: the innermost user frame on the stack."""
    frames = ((f.filename, f.lineno) for f in inspect.stack(context=0)[1:])
    return next((site(f, n) for f, n in frames if owner(f) == "user"), None)


class ProgramError(CommandError):
    """The user's program raised: their file and line, their exception; an input error (exit 3)."""

    def __init__(self, error: BaseException, frames: list[traceback.FrameSummary]) -> None:
        what = f"{type(error).__name__}: {error}".rstrip(": ")
        if isinstance(error, SystemExit):  # sys.exit() ends a Pulumi program's run as a failure
            what = f"it called sys.exit({error.code!r}) before its end"
        where = [f"  {frame.filename}, line {frame.lineno}, in {frame.name}" for frame in frames]
        code = [frame.line for frame in frames]
        lines: list[str] = []
        for place, text in zip(where, code, strict=True):
            lines.append(place)
            if text:
                lines.append(f"    {text}")
        last = frames[-1] if frames else None
        path = site(last.filename, last.lineno) if last else "your program"
        super().__init__(
            INPUT,
            "\n".join([f"your program failed: {what}", *lines]),
            [
                {
                    "path": path,
                    "problem": f"your program raised {type(error).__name__}",
                    "received": str(error),
                    "allowed": "a program that runs to its end",
                    "fix": f"fix {path} (the traceback is your program's, not gpuc's)",
                }
            ],
        )


def user_frames(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    """The traceback's frames that are the user's, outermost first."""
    return [f for f in traceback.extract_tb(tb) if owner(f.filename) == "user"][-MAX_FRAMES:]


def program_error(error: BaseException) -> ProgramError | None:
    """The ProgramError an exception out of a user's program stands for, or None when it failed
    inside this package (a bug in gpuc)."""
    if isinstance(error, SyntaxError) and error.filename:
        # compile() raised it: the file and line are the error's own, not a frame's
        if owner(error.filename) != "user":
            return None
        frame = traceback.FrameSummary(
            error.filename, error.lineno or 0, "<module>", line=(error.text or "").strip()
        )
        return ProgramError(error, [*user_frames(error.__traceback__), frame][-MAX_FRAMES:])
    for frame in reversed(traceback.extract_tb(error.__traceback__)):  # innermost first
        kind = owner(frame.filename)
        if kind == "ours":
            return None
        if kind == "user":
            return ProgramError(error, user_frames(error.__traceback__))
    return None
