"""Read stacks/Pulumi.<stack>.yaml into the flat string map the Pulumi runtime hands a program,
with Pulumi's YAML reading (infra/pulumi_yaml.py)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from gpu_cluster.infra import pulumi_yaml
from gpu_cluster.infra.suggest import suggest
from gpu_cluster.infra.yaml_numbers import (
    NumberNote,
    non_finite,
    path_text,
    still_set,
    surprising_numbers,
)

PROJECT_FILE = "Pulumi.yaml"


class StackFileError(Exception):
    """A stack file is missing or unreadable (a message for the user, not a traceback)."""


def project_root(start: Path | None = None) -> Path:
    """The nearest folder holding Pulumi.yaml, from ``start`` (default: cwd) or this package."""
    for base in (start or Path.cwd(), Path(__file__).resolve().parent):
        for folder in (base, *base.parents):
            if (folder / PROJECT_FILE).is_file():
                return folder
    raise StackFileError(f"no {PROJECT_FILE} found above {start or Path.cwd()}")


STACK_FILE_KEYS = frozenset(
    {"config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment"}
)


def read_yaml(path: Path) -> Any:
    """A YAML file's document; any way it cannot be read is a StackFileError."""
    try:
        return pulumi_yaml.load(path.read_text(encoding="utf-8-sig"))  # Pulumi strips a BOM
    except UnicodeDecodeError as error:
        bad = error.object[error.start : error.start + 1]
        raise StackFileError(f"{path} is not UTF-8 text (byte {error.start}: {bad!r})") from None
    except yaml.YAMLError as error:
        raise StackFileError(f"{path} is not valid YAML: {error}") from None
    except OSError as error:
        raise StackFileError(f"{path} cannot be read: {error.strerror}") from None


def read_project(root: Path) -> dict[str, Any]:
    document = read_yaml(root / PROJECT_FILE) or {}
    if not isinstance(document, dict):
        raise StackFileError(f"{root / PROJECT_FILE} must be a mapping (name:, runtime:, ...)")
    return document


def stacks_dir(root: Path) -> Path:
    return root / read_project(root).get("stackConfigDir", ".")


def project_defaults(root: Path) -> dict[str, str]:
    """Defaults of Pulumi.yaml's typed config declarations, as the CLI applies them."""
    project = read_project(root)
    name = project.get("name", "")
    config = project.get("config")
    config = config if isinstance(config, dict) else {}
    refused = [
        found
        for key, spec in config.items()
        if isinstance(spec, dict)
        for found in non_finite(spec.get("default"), (f"{name}:{key}", "default"))
    ]
    if refused:
        raise StackFileError(non_finite_message(root / PROJECT_FILE, refused))
    return {
        f"{name}:{key}": to_config_value(spec["default"])
        for key, spec in config.items()
        if isinstance(spec, dict) and "default" in spec
    }


def available_stacks(root: Path) -> list[str]:
    return sorted(
        p.name[len("Pulumi.") : -len(".yaml")] for p in stacks_dir(root).glob("Pulumi.*.yaml")
    )


def to_config_value(value: Any) -> str:
    """The string Pulumi hands the program for a config value (infra/pulumi_yaml.py)."""
    return pulumi_yaml.config_string(value)


def program_of(root: Path, stack: str) -> tuple[str, Path, dict[str, str]]:
    """A Pulumi Python project's name, program file and stack config, as the CLI reads them:
    ``main`` (a folder holding __main__.py, or a file; default the project folder)."""
    if not (root / PROJECT_FILE).is_file():
        raise StackFileError(f"{root} is not a Pulumi project: no {PROJECT_FILE} in it")
    project = read_project(root)
    runtime = project.get("runtime")
    runtime = runtime.get("name") if isinstance(runtime, dict) else runtime
    if runtime != "python":
        raise StackFileError(f"{root / PROJECT_FILE}: runtime {runtime!r}; gpuc plans python")
    main = root / str(project.get("main") or ".")
    program = main / "__main__.py" if main.is_dir() else main
    if not program.is_file():
        raise StackFileError(f"{root / PROJECT_FILE}: no program at {program}")
    return str(project.get("name", root.name)), program, load_stack_config(stack, root)


def load_stack_config(stack: str, root: Path | None = None) -> dict[str, str]:
    root = root or project_root()
    path = stacks_dir(root) / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        stacks = available_stacks(root)
        known = ", ".join(stacks) or "none"
        hint = suggest(stack, stacks)
        raise StackFileError(
            f"no stack '{stack}': {path} does not exist (stacks: {known})"
            + (f"; {hint.strip()}" if hint else "")
        )
    document = read_yaml(path) or {}
    if not isinstance(document, dict):
        raise StackFileError(f"{path} must be a mapping with a 'config:' section")
    stray = sorted(str(key) for key in document if key not in STACK_FILE_KEYS)
    if stray:
        raise StackFileError(
            f"{path}: {', '.join(stray)} {'is' if len(stray) == 1 else 'are'} outside 'config:' "
            "and would be ignored; indent settings under config: (e.g. "
            f"'  gpu-cluster:{stray[0].split(':')[-1]}: ...')"
        )
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise StackFileError(f"{path}: 'config:' must be a mapping of key: value")
    refused = [found for key, value in config.items() for found in non_finite(value, (str(key),))]
    if refused:
        raise StackFileError(non_finite_message(path, refused))
    values = {str(key): to_config_value(value) for key, value in config.items()}
    return {**project_defaults(root), **values}


def non_finite_message(path: Path, refused: list[tuple[tuple[str | int, ...], float]]) -> str:
    """Pulumi cannot load a stack file holding .inf or .nan (infra/yaml_numbers.py)."""
    where = ", ".join(f"{path_text(at)}: {pulumi_yaml.flow(value)}" for at, value in refused)
    return (
        f"{path}: {where}: Pulumi cannot hand infinity or NaN to a program (loading the stack "
        "file fails: json: unsupported value); write a finite number, or leave the key out "
        "where unset means no limit (e.g. spot.maxPrice)"
    )


def number_notes(stack: str, config: dict[str, str], root: Path | None = None) -> list[NumberNote]:
    """Numbers of the stack's file that Pulumi reads otherwise than a person does (010 is 8),
    where ``config`` still holds them; none without a readable stack file."""
    try:
        project = (root or project_root()) / PROJECT_FILE
        stamp = project.stat()
        folder = _stacks_dir(str(project.parent), stamp.st_mtime_ns, stamp.st_size)
        path = folder / f"Pulumi.{stack}.yaml"
        status = path.stat()
        notes = _file_notes(str(path), status.st_mtime_ns, status.st_size)
    except (StackFileError, OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    return [note for note in notes if still_set(config, note)]


@lru_cache(maxsize=16)
def _stacks_dir(root: str, mtime_ns: int, size: int) -> Path:
    """stacks_dir, read once per version of Pulumi.yaml."""
    del mtime_ns, size  # the cache key
    return stacks_dir(Path(root))


@lru_cache(maxsize=64)
def _file_notes(path: str, mtime_ns: int, size: int) -> tuple[NumberNote, ...]:
    """A stack file's notes, read once per version of the file (every load_spec asks)."""
    del mtime_ns, size  # the cache key: a changed file is read again
    return tuple(surprising_numbers(Path(path).read_text(encoding="utf-8-sig")))


def number_warnings(stack: str, config: dict[str, str], root: Path | None = None) -> list[str]:
    """number_notes as warnings (`gpuc plan` prints them, `pulumi up` logs them)."""
    return [note.warning() for note in number_notes(stack, config, root)]
