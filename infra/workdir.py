"""`gpuc run --workdir DIR`: pack a job's folder into one deterministic, content-addressed tar.gz.

What is packed: every regular file and symlink under DIR that the ignore rules leave, with
git's semantics (gitignore(5)): the `.gitignore` of DIR and of every folder below it (a deeper
file overrides a shallower one; `!` re-includes; a trailing `/` matches folders only; a pattern
with a `/` before its end is anchored to its file's folder; a file under an excluded folder
cannot be re-included), then DIR/.gpucignore (same syntax, paths relative to DIR) on top of
them: its matching lines win over every .gitignore, so `!name` there re-includes what a
.gitignore excludes. `.gitignore` files above DIR, `.git/info/exclude` and git's global
excludes are not read. Always left out: `.git` (folder or file, at any depth) and every
virtualenv (a folder holding `pyvenv.cfg`). Left out by default, under every ignore file (a
`!` line re-includes them): DEFAULT_IGNORES (`__pycache__/`, `*.py[cod]`, `.ipynb_checkpoints/`,
`.pytest_cache/`, `.mypy_cache/`, `.ruff_cache/`, `.DS_Store`). Empty folders are not stored;
sockets, fifos and devices are skipped.

Deterministic: entries sorted by path, mtime 0, uid/gid 0, no user or group names, mode 0644 or
0755 (the owner's executable bit kept), symlinks 0777, POSIX pax format, a fixed gzip header
(mtime 0, no name). The same files with the same contents give the same bytes (with the same
zlib), so the digest names the archive in the bucket and an unchanged folder is uploaded once.

Refused before anything is uploaded (WorkdirError, every offender listed, with the lines to
add to .gpucignore): files that look like credentials (CREDENTIAL_NAMES, CREDENTIAL_FOLDERS,
CREDENTIAL_PATHS; `.env.example`, `.env.sample`, `.env.template` and `*.pub` are allowed),
symlinks that would not resolve on the node (absolute, leaving DIR, or pointing at something
not packed), unreadable files, and more than MAX_SOURCE_BYTES (100 MiB) of files or MAX_FILES
(10,000) files: every node downloads the archive at every job start, so datasets and
checkpoints belong in the bucket. Sizes come from the walk (lstat), before any file is read;
the walk stops after WALK_LIMIT entries."""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import posixpath
import re
import shlex
import stat
import struct
import tarfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from gpu_cluster.components.user_data import DATA_MOUNT

MAX_SOURCE_BYTES = 100 * 1024 * 1024  # 100 MiB of files: downloaded by every node, every start
MAX_FILES = 10_000
WALK_LIMIT = 10 * MAX_FILES  # entries kept before the walk gives up counting
LISTED = 20  # offenders named in a message before "and N more"
IGNORE_FILE = ".gpucignore"
NODE_HOME = "/home/ubuntu"  # a job's working directory without --workdir
DEFAULT_IGNORES = (
    "__pycache__/",
    "*.py[cod]",
    ".ipynb_checkpoints/",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".DS_Store",
)
ALWAYS_SKIPPED = (".git",)
VENV_MARKER = "pyvenv.cfg"
# file name (lower-case, fnmatch) -> what it is; `*.pub` (public keys) never matches
CREDENTIAL_NAMES = {
    "*.pem": "a private key or certificate",
    "*.key": "a private key",
    "*.p12": "a PKCS#12 key store",
    "*.pfx": "a PKCS#12 key store",
    "id_rsa*": "a private SSH key",
    "id_dsa*": "a private SSH key",
    "id_ecdsa*": "a private SSH key",
    "id_ed25519*": "a private SSH key",
    ".env": "environment variables, often secrets",
    ".env.*": "environment variables, often secrets",
    ".netrc": "login credentials (netrc)",
    ".npmrc": "npm credentials",
    ".pypirc": "PyPI credentials",
    ".git-credentials": "git credentials",
    "credentials.json": "a credentials file",
}
ALLOWED_NAMES = (".env.example", ".env.sample", ".env.template", "*.pub")
CREDENTIAL_FOLDERS = {".aws": "AWS credentials", ".ssh": "SSH keys"}
CREDENTIAL_PATHS = {".docker/config.json": "Docker registry credentials"}


@dataclass(frozen=True)
class PackedWorkdir:
    archive: bytes  # the tar.gz
    sha256: str  # hex digest of archive
    files: tuple[str, ...]  # relative POSIX paths packed (files and symlinks), sorted
    size: int  # len(archive)
    source_bytes: int  # total bytes of the files packed


class WorkdirError(Exception):
    """A user mistake; nothing was uploaded. code: 2 usage (missing, not a folder), 3 refused."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# --- ignore rules -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    include: bool  # True: excludes (pathspec's sense), False: a `!` line
    regex: re.Pattern[str]


def _rules(lines: Iterable[str]) -> tuple[tuple[_Rule, ...], tuple[_Rule, ...]]:
    """(rules for files, rules for folders) of one ignore file, in its order. A folder is matched
    as a file of the same path with each `dir/` line read as `dir`. Lines git would discard
    (invalid ranges, `/`) are dropped."""
    files: list[_Rule] = []
    folders: list[_Rule] = []
    for raw in lines:
        line = raw if raw.endswith("\\ ") else raw.rstrip()
        if line.lstrip("!") in ("", "/"):
            continue
        try:
            (pattern,) = pathspec.GitIgnoreSpec.from_lines([line]).patterns
            folder_line = line[:-1] if line.endswith("/") else line
            (folder,) = pathspec.GitIgnoreSpec.from_lines([folder_line]).patterns
        except ValueError:  # pathspec's GitIgnorePatternError: git discards the line too
            continue
        if pattern.include is None or pattern.regex is None:
            continue  # a comment
        files.append(_Rule(pattern.include, pattern.regex))
        if folder.include is not None and folder.regex is not None:
            folders.append(_Rule(folder.include, folder.regex))
    return tuple(files), tuple(folders)


def _verdict(rules: tuple[_Rule, ...], path: str) -> bool | None:
    """The last rule matching `path` itself decides (True: ignored, False: re-included, None: no
    rule matches). pathspec's regexes also match the paths under a matched folder, marking the
    folder's slash with the group `ps_d`: those matches are the folder's, decided when the walk
    reached it, so they are skipped here."""
    verdict = None
    for rule in rules:
        match = rule.regex.search(path)
        if match is not None and not match.groupdict().get("ps_d"):
            verdict = rule.include
    return verdict


@dataclass(frozen=True)
class _Source:
    base: str  # the folder of the ignore file, relative to DIR ("" or "sub/")
    files: tuple[_Rule, ...]
    folders: tuple[_Rule, ...]

    @classmethod
    def of(cls, base: str, lines: Iterable[str]) -> _Source:
        return cls(base, *_rules(lines))


DEFAULTS = _Source.of("", DEFAULT_IGNORES)


def _ignored(path: str, is_dir: bool, sources: list[_Source]) -> bool:
    """Highest precedence first: .gpucignore, then the deepest .gitignore, ..., the defaults."""
    for source in sources:
        rules = source.folders if is_dir else source.files
        verdict = _verdict(rules, path[len(source.base) :])
        if verdict is not None:
            return verdict
    return False


# --- the walk ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    path: str
    size: int = 0
    executable: bool = False
    link: str | None = None  # a symlink's target, as written


@dataclass
class _Walk:
    root: Path
    entries: list[_Entry] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    total: int = 0
    stopped: bool = False  # more than WALK_LIMIT entries: the counts are a lower bound


def _read_lines(path: Path, walk: _Walk, rel: str) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        walk.unreadable.append(rel)
        return []


def _walk(root: Path) -> _Walk:
    walk = _Walk(root)
    gpuc = root / IGNORE_FILE
    top = [_Source.of("", _read_lines(gpuc, walk, IGNORE_FILE))] if gpuc.is_file() else []
    _visit(walk, root, "", top, [])
    return walk


def _visit(walk: _Walk, folder: Path, rel: str, top: list[_Source], git: list[_Source]) -> None:
    gitignore = folder / ".gitignore"
    if gitignore.is_file():
        git = [_Source.of(rel, _read_lines(gitignore, walk, rel + ".gitignore")), *git]
    sources = [*top, *git, DEFAULTS]
    try:
        with os.scandir(folder) as listing:
            items = sorted(listing, key=lambda item: item.name)
    except OSError:
        walk.unreadable.append(rel or ".")
        return
    for item in items:
        if walk.stopped:
            return
        path = rel + item.name
        if item.name in ALWAYS_SKIPPED:
            continue
        try:
            info = item.stat(follow_symlinks=False)
        except OSError:
            walk.unreadable.append(path)
            continue
        is_dir = stat.S_ISDIR(info.st_mode)
        if not (is_dir or stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
            continue  # a socket, fifo or device: nothing a node could use
        if _ignored(path, is_dir, sources):
            continue
        if is_dir:
            if not (Path(item.path) / VENV_MARKER).is_file():
                _visit(walk, Path(item.path), path + "/", top, git)
            continue
        if stat.S_ISLNK(info.st_mode):
            walk.entries.append(_Entry(path, link=os.readlink(item.path)))
        else:
            executable = bool(info.st_mode & stat.S_IXUSR)
            walk.entries.append(_Entry(path, info.st_size, executable))
            walk.total += info.st_size
        if len(walk.entries) >= WALK_LIMIT:
            walk.stopped = True


# --- what is refused --------------------------------------------------------------------------


def _escape(path: str) -> str:
    """An ignore-file line matching exactly `path` (anchored; glob characters escaped)."""
    escaped = re.sub(r"([\\*?\[!#])", r"\\\1", path)
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return "/" + escaped


def _listed(items: list[str], limit: int = LISTED) -> str:
    text = "".join(f"\n  - {item}" for item in items[:limit])
    if len(items) > limit:
        text += f"\n  - and {len(items) - limit} more"
    return text


def _lines(root: Path, paths: list[str]) -> str:
    lines = "".join(f"\n    {_escape(path)}" for path in paths[:LISTED])
    if len(paths) > LISTED:
        lines += f"\n    (and {len(paths) - LISTED} more: run again after adding these)"
    return f"add to {root / IGNORE_FILE}:{lines}"


def _credential(path: str) -> tuple[str, str] | None:
    """(what to exclude, what it is) when `path` looks like credentials."""
    parts = path.split("/")
    for depth, part in enumerate(parts[:-1]):
        if part in CREDENTIAL_FOLDERS:
            return "/".join(parts[: depth + 1]) + "/", CREDENTIAL_FOLDERS[part]
    for suffix, what in CREDENTIAL_PATHS.items():
        if path == suffix or path.endswith("/" + suffix):
            return path, what
    name = parts[-1].lower()
    if any(fnmatch.fnmatchcase(name, allowed) for allowed in ALLOWED_NAMES):
        return None
    for pattern, what in CREDENTIAL_NAMES.items():
        if fnmatch.fnmatchcase(name, pattern):
            return path, what
    return None


def _credentials_problem(walk: _Walk) -> str:
    found: dict[str, str] = {}
    for entry in walk.entries:
        hit = _credential(entry.path)
        if hit:
            found.setdefault(*hit)
    if not found:
        return ""
    paths = sorted(found)
    return (
        f"{len(paths)} path(s) look like credentials, which would be copied to every node:"
        + _listed([f"{path} ({found[path]})" for path in paths])
        + "\n  fix: remove them from the folder (keep secrets in AWS Secrets Manager or SSM), "
        + "or exclude them: "
        + _lines(walk.root, paths)
    )


def _link_problem(walk: _Walk) -> str:
    packed = {entry.path for entry in walk.entries}
    folders = {posixpath.dirname(path) for path in packed}
    folders |= {"/".join(f.split("/")[:n]) for f in folders for n in range(1, f.count("/") + 1)}
    bad: dict[str, str] = {}
    for entry in walk.entries:
        if entry.link is None:
            continue
        lexical = posixpath.normpath(posixpath.join(posixpath.dirname(entry.path), entry.link))
        if posixpath.isabs(entry.link):
            bad[entry.path] = f"-> {entry.link}: an absolute path, outside the folder"
            continue
        try:
            real = (walk.root / entry.path).resolve()
            target = real.relative_to(walk.root).as_posix() if real != walk.root else ""
        except ValueError:
            target = None
        except (OSError, RuntimeError):
            bad[entry.path] = f"-> {entry.link}: a symlink loop"
            continue
        if lexical == ".." or lexical.startswith("../") or target is None:
            bad[entry.path] = f"-> {entry.link}: outside the folder"
        elif target and target not in packed and target not in folders:
            missing = not os.path.lexists(walk.root / target)
            why = "does not exist" if missing else "is not packed (an ignore rule excludes it)"
            bad[entry.path] = f"-> {entry.link}: {target} {why}"
    if not bad:
        return ""
    paths = sorted(bad)
    return (
        f"{len(paths)} symlink(s) would not resolve on the nodes:"
        + _listed([f"{path} {bad[path]}" for path in paths])
        + "\n  fix: copy the file into the folder in place of the link, or exclude the link: "
        + _lines(walk.root, paths)
    )


def human(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _size_problem(walk: _Walk) -> str:
    files = len(walk.entries)
    if walk.total <= MAX_SOURCE_BYTES and files <= MAX_FILES:
        return ""
    at_least = "at least " if walk.stopped else ""
    groups: dict[str, list[int]] = {}
    for entry in walk.entries:
        head, sep, _ = entry.path.partition("/")
        group = groups.setdefault(head + sep, [0, 0])
        group[0] += entry.size
        group[1] += 1
    by_size = sorted(groups.items(), key=lambda item: (-item[1][0], -item[1][1], item[0]))
    by_count = sorted(by_size, key=lambda item: (-item[1][1], item[0]))
    folders = [
        f"{name} {human(size)} in {count:,} file{'s' * (count != 1)}"
        for name, (size, count) in (by_size if walk.total > MAX_SOURCE_BYTES else by_count)
        if name.endswith("/")
    ]
    largest = sorted(walk.entries, key=lambda entry: (-entry.size, entry.path))
    return (
        f"{at_least}{human(walk.total)} in {at_least}{files:,} files is more than a workdir "
        f"holds ({human(MAX_SOURCE_BYTES)}, {MAX_FILES:,} files): every node downloads it at "
        "every job start.\n  largest files:"
        + _listed([f"{entry.path} {human(entry.size)}" for entry in largest], 5)
        + ("\n  largest folders:" + _listed(folders, 5) if folders else "")
        + "\n  fix: datasets and checkpoints belong in the stack's bucket (aws s3 cp --recursive "
        f"DIR s3://<bucket>/datasets/NAME/): jobs read them at {DATA_MOUNT}/datasets/NAME (the "
        "data mount) and write checkpoints to $GPUC_CHECKPOINT_URI; or exclude them: "
        + _lines(walk.root, _suggested(walk.entries, by_size, by_count))
    )


def _suggested(
    entries: list[_Entry],
    by_size: list[tuple[str, list[int]]],
    by_count: list[tuple[str, list[int]]],
) -> list[str]:
    """Lines that bring the folder under the limits: its largest files when 20 do, else its
    largest top-level entries."""
    total, count, lines = sum(entry.size for entry in entries), len(entries), []
    for entry in sorted(entries, key=lambda entry: (-entry.size, entry.path))[:LISTED]:
        if total <= MAX_SOURCE_BYTES and count <= MAX_FILES:
            return lines
        total, count, lines = total - entry.size, count - 1, [*lines, entry.path]
    if total <= MAX_SOURCE_BYTES and count <= MAX_FILES:
        return lines
    total, count, lines = sum(entry.size for entry in entries), len(entries), []
    order = by_size if total > MAX_SOURCE_BYTES else by_count
    for name, (size, number) in order:
        if total <= MAX_SOURCE_BYTES and count <= MAX_FILES:
            break
        total, count, lines = total - size, count - number, [*lines, name]
    return lines


# --- packing ----------------------------------------------------------------------------------


def _archive(root: Path, entries: list[_Entry]) -> tuple[bytes, int]:
    """(the tar.gz, bytes of the files read); a file that grew past the limit is refused."""
    buffer = io.BytesIO()
    source = 0
    unreadable = []
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in sorted(entries, key=lambda entry: entry.path):
            info = tarfile.TarInfo(entry.path)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if entry.link is not None:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.link, 0o777
                tar.addfile(info)
                continue
            try:
                data = (root / entry.path).read_bytes()
            except OSError:
                unreadable.append(entry.path)
                continue
            source += len(data)
            info.size, info.mode = len(data), 0o755 if entry.executable else 0o644
            tar.addfile(info, io.BytesIO(data))
    if unreadable:
        raise WorkdirError(_unreadable_message(root, unreadable), 3)
    if source > MAX_SOURCE_BYTES:
        raise WorkdirError(
            f"--workdir {root}: its files grew to {human(source)} while being packed, more than "
            f"{human(MAX_SOURCE_BYTES)}; nothing was uploaded. Pack a folder nothing writes to.",
            3,
        )
    return _gzip(buffer.getvalue()), source


def _gzip(data: bytes) -> bytes:
    """gzip (RFC 1952) with a fixed header (no name, mtime 0, OS 255 "unknown"), written here
    rather than by the gzip module, whose header bytes differ between Python versions."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = compressor.compress(data) + compressor.flush()
    trailer = struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + body + trailer


def _unreadable_message(root: Path, paths: list[str]) -> str:
    return (
        f"--workdir {root}: {len(paths)} path(s) cannot be read:"
        + _listed(sorted(paths))
        + "\n  fix: make them readable (chmod), or exclude them: "
        + _lines(root, sorted(paths))
        + "\nNothing was uploaded."
    )


def pack_workdir(folder: Path) -> PackedWorkdir:
    """DIR as a deterministic tar.gz (see the module's docstring); WorkdirError when refused."""
    given = Path(folder)
    if not given.exists():
        raise WorkdirError(
            f"--workdir {given}: no such folder. Give the folder holding the job's code, e.g. "
            "--workdir . from where train.py is",
            2,
        )
    if not given.is_dir():
        raise WorkdirError(
            f"--workdir {given}: not a folder. Give the folder holding the file, e.g. "
            f"--workdir {given.parent}",
            2,
        )
    root = given.resolve()
    walk = _walk(root)
    problems = [
        problem
        for problem in (_size_problem(walk), _credentials_problem(walk), _link_problem(walk))
        if problem
    ]
    if problems:
        raise WorkdirError(
            f"--workdir {given}: refused, nothing was uploaded.\n" + "\n".join(problems), 3
        )
    if walk.unreadable:
        raise WorkdirError(_unreadable_message(root, walk.unreadable), 3)
    if not walk.entries:
        raise WorkdirError(
            f"--workdir {given}: nothing to pack: it holds no file that .gitignore, "
            f"{IGNORE_FILE} and the defaults ({', '.join(DEFAULT_IGNORES)}) leave. "
            "Give the folder holding the job's code, or re-include files with a `!` line in "
            f"{root / IGNORE_FILE}",
            3,
        )
    archive, source = _archive(root, walk.entries)
    return PackedWorkdir(
        archive=archive,
        sha256=hashlib.sha256(archive).hexdigest(),
        files=tuple(sorted(entry.path for entry in walk.entries)),
        size=len(archive),
        source_bytes=source,
    )


# --- the command's script ---------------------------------------------------------------------

SCRIPT_SUFFIXES = (".py", ".sh")
STOP_OPTIONS = ("-m", "-c")  # a module or inline code follows: no local file


def script_of(command: list[str]) -> str | None:
    """The local file a command runs: its first `*.py`/`*.sh` argument or `./` path (None for
    `python -m module`, `-c code`, absolute paths and `~`: those name the node's files)."""
    args = command
    if len(command) == 1 and " " in command[0]:
        try:
            args = shlex.split(command[0])
        except ValueError:
            args = command
    for arg in args:
        if arg in STOP_OPTIONS:
            return None
        if arg.startswith("-") or ("=" in arg and not arg.startswith("./")):
            continue  # an option, or `env NAME=VALUE`
        if arg.startswith(("./", "../")) or arg.endswith(SCRIPT_SUFFIXES):
            if arg.startswith(("/", "~")):
                return None
            return arg
    return None


def missing_script_hint(
    command: list[str], packed: PackedWorkdir | None, cwd: Path | None = None
) -> str:
    """A hint when the command's local script will not be on the nodes ("" when it will, or
    when the command names none). `packed`: the --workdir archive (None: no --workdir);
    `cwd`: where gpuc runs (to tell "it exists here")."""
    script = script_of(command)
    if script is None:
        return ""
    path = posixpath.normpath(script)
    if packed is None:
        here = cwd is not None and (cwd / script).is_file()
        where = "it exists here but is not on the nodes" if here else "it is not on the nodes"
        return (
            f"{script}: {where}: give --workdir DIR (the folder holding it, e.g. --workdir .) "
            f"so every node gets it; without --workdir the job runs in {NODE_HOME} on each node"
        )
    if path == ".." or path.startswith("../"):
        return (
            f"{script}: it is outside the workdir (the job runs in the workdir's copy on every "
            "node): give --workdir the folder that holds it, and the path from there"
        )
    if path in packed.files:
        return ""
    return (
        f"{script}: it is not in the workdir's {len(packed.files)} packed files: the path is "
        "relative to --workdir DIR (the job runs in its copy on every node); is it excluded "
        f"by a .gitignore or {IGNORE_FILE}, or in another folder?"
    )
