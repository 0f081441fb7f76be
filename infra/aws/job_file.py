"""`gpuc run -f job.yaml`: a job's settings kept in a file, read and checked like a stack file.

A job file is a YAML mapping of these keys, and nothing else:

    name: pretrain                      # default: the script's name
    command: [python, train.py, --epochs, "3"]   # or one string, split like a shell line
    workdir: .                          # the code's folder, relative to the job file's folder
    setup: pip install -r requirements.txt       # or a list of lines, joined with newlines
    image: nvcr.io/nvidia/pytorch:24.10-py3
    env: {NCCL_DEBUG: WARN}             # NAME: value, as --env takes them
    maxRestarts: 5                      # 0-100

Scalars are read as written (yaml.v3's rules, as Pulumi reads stack files): ``--lr 3e-4`` stays
``3e-4`` and ``yes`` stays ``yes``; an empty env value is the empty string. A flag given on the
command line wins over the file (``--env``: variable by variable). Every problem is collected,
each with its path (``job.yaml: env.nccl_debug``), the value received, what is allowed and a
fix, and raised once as a JobFileError; nothing is uploaded or started from an invalid file.

Imports go one way: this module reads infra/errors.py, infra/pulumi_yaml.py, infra/suggest.py
and the job rules of infra/aws/jobs.py and infra/aws/job_image.py (the same checks as --name,
--env and --image's reference grammar); only the job commands (infra/aws/job_command.py) and
the CLI import it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from gpu_cluster.infra.aws.job_image import ImageError, parse_image
from gpu_cluster.infra.aws.jobs import ENV_NAME, JOB_NAME, JobError, parse_env
from gpu_cluster.infra.errors import NOT_SET, Problem, render_problems
from gpu_cluster.infra.pulumi_yaml import NULLS, PLAIN_TAG, PulumiLoader, flow
from gpu_cluster.infra.suggest import closest, suggest

# The job's spec is one SSM standard parameter (4 KB, SSM PutParameter): the setup gets half.
SETUP_MAX_BYTES = 2048
MAX_RESTARTS = (0, 100)
Where = Callable[[str], str]  # a key -> its path in the file, or the " (line N)" it is on
KEYS = ("name", "command", "workdir", "setup", "image", "env", "maxRestarts")
EXAMPLE_COMMAND = ["python", "train.py"]


class JobFileModel(BaseModel):
    """The shape of a job file (after its scalars are read as written: see as_written)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str | None = None
    command: str | list[str] | None = None
    workdir: str | None = None
    setup: str | list[str] | None = None
    image: str | None = None
    env: dict[str, str] | None = None
    max_restarts: int | None = Field(
        default=None, alias="maxRestarts", ge=MAX_RESTARTS[0], le=MAX_RESTARTS[1]
    )


@dataclass(frozen=True)
class JobFile:
    """A valid job file's settings (None: not in the file)."""

    path: Path
    name: str | None = None
    command: list[str] | None = None
    workdir: Path | None = None  # resolved against the job file's folder
    setup: str | None = None
    image: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    max_restarts: int | None = None


class JobFileError(Exception):
    """A job file that cannot be used, with every problem found in it."""

    def __init__(self, shown: str, problems: list[Problem]) -> None:
        self.shown = shown
        self.problems = problems
        count = len(problems)
        header = (
            f"{shown} has {count} problem{'s' if count != 1 else ''}; nothing was uploaded or "
            "started:"
        )
        super().__init__(render_problems("", problems, header))


def write(key: str, value: Any) -> str:
    """The fix that sets a top-level key: one line of YAML that reads back as ``value``."""
    return f"write `{key}: {flow(value)}`"


def default_job_name(command: list[str]) -> str:
    """`python train.py` -> train; a name systemd and SSM both take."""
    script = next(
        (part for part in command if part.endswith(".py")), command[0] if command else "job"
    )
    return job_name_like(Path(script).stem)


def job_name_like(text: str) -> str:
    """The nearest valid job name to ``text`` (lower case, '-' for anything else)."""
    stem = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    return stem if JOB_NAME.match(stem) else "job"


def setup_issue(setup: str) -> str:
    """Why a setup command cannot be used ("" when it can): empty, or too big for the spec."""
    if not setup.strip():
        return "the setup command is empty"
    size = len(setup.encode())
    if size > SETUP_MAX_BYTES:
        return (
            f"the setup command is {size} bytes, more than {SETUP_MAX_BYTES} (the job's whole "
            "spec is one 4 KB SSM parameter)"
        )
    return ""


def env_issue(name: str) -> str:
    """Why ``name`` cannot be a job's variable ("" when it can), by --env's own rules."""
    if not ENV_NAME.match(name):
        return "not a variable name"
    try:
        parse_env([f"{name}="])
    except JobError:
        return (
            f"the node sets {name} itself (its cluster settings, the AWS CLI, gpu-cluster or "
            "torchrun)"
        )
    return ""


def env_name_like(name: str) -> str:
    """A name --env takes, close to ``name``: upper case, '_' for anything else, and MY_ in
    front of one the node sets itself or one that starts with a digit."""
    candidate = re.sub(r"[^A-Z0-9_]", "_", name.upper()) or "MY_VARIABLE"
    if not env_issue(candidate):
        return candidate
    return f"MY_{candidate}".replace("__", "_")


def as_written(node: yaml.Node | None) -> Any:
    """A YAML node with every scalar as the text written (a plain null is None)."""
    if node is None:
        return None
    if isinstance(node, yaml.ScalarNode):
        if node.tag == PLAIN_TAG and node.value in NULLS:
            return None
        return node.value
    if isinstance(node, yaml.SequenceNode):
        return [as_written(item) for item in node.value]
    if isinstance(node, yaml.MappingNode):
        return {str(as_written(k)): as_written(v) for k, v in node.value}
    return None  # pragma: no cover - compose yields only the three kinds


def load_job_file(path: Path | str) -> JobFile:
    """The job file at ``path`` (shown as given), or a JobFileError with every problem."""
    path = Path(path)
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise JobFileError(shown, [file_problem(shown, "the file does not exist")]) from None
    except IsADirectoryError:
        raise JobFileError(shown, [file_problem(shown, "it is a folder")]) from None
    except UnicodeDecodeError as error:
        problem = f"it is not UTF-8 text (byte {error.start})"
        raise JobFileError(shown, [file_problem(shown, problem)]) from None
    except OSError as error:
        problem = f"it cannot be read: {error.strerror}"
        raise JobFileError(shown, [file_problem(shown, problem)]) from None
    return read_job_file(text, path)


def file_problem(shown: str, problem: str) -> Problem:
    return Problem(
        path=shown,
        received=NOT_SET,
        problem=problem,
        allowed="a YAML job file (name:, command:, workdir:, setup:, image:, env:, maxRestarts:)",
        fix="give the path of your job file (-f path/to/job.yaml), relative to this folder "
        f"({Path.cwd()}) or absolute",
    )


def read_job_file(text: str, path: Path) -> JobFile:
    """A job file's text, checked: its settings, or a JobFileError with every problem."""
    shown = str(path)
    loader = PulumiLoader(text)
    try:
        node = loader.get_single_node()
        typed = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as error:
        if error.problem_mark is None and error.context_mark is None:
            # a key given twice (yaml.v3 refuses it too); the message names both lines
            problem = Problem(shown, NOT_SET, str(error), "each key once", "keep one of them")
            raise JobFileError(shown, [problem]) from None
        raise JobFileError(shown, [syntax_problem(shown, text, error)]) from None
    except yaml.YAMLError as error:
        problem = Problem(shown, NOT_SET, f"not valid YAML: {error}", "YAML", "correct it")
        raise JobFileError(shown, [problem]) from None
    finally:
        loader.dispose()
    if typed is None:
        return JobFile(path)
    if not isinstance(node, yaml.MappingNode) or not isinstance(typed, dict):
        raise JobFileError(shown, [not_a_mapping(shown, typed)])
    return checked(shown, path, node, typed)


def syntax_problem(shown: str, text: str, error: yaml.MarkedYAMLError) -> Problem:
    mark = error.problem_mark or error.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
    lines = text.splitlines()
    received = lines[min(line, len(lines)) - 1] if line and lines else NOT_SET
    what = " ".join(part for part in (error.context, error.problem) if part)
    return Problem(
        path=f"{shown}: line {line}, column {column}",
        received=received,
        problem=f"not valid YAML: {what}",
        allowed="YAML: one `key: value` per line; quote a value that holds ': ' or starts "
        "with a special character ('{', '[', '*', '&', '!', '%', '@', '`')",
        fix=f"correct line {line} (quote the value, or fix its indentation)",
    )


def not_a_mapping(shown: str, document: Any) -> Problem:
    return Problem(
        path=shown,
        received=document,
        problem=f"a job file is a mapping of settings, not a {type(document).__name__}",
        allowed=f"the keys {', '.join(KEYS)}, one `key: value` per line",
        fix="write the settings as `key: value` lines, e.g. `command: [python, train.py]`",
    )


def checked(shown: str, path: Path, node: yaml.MappingNode, typed: dict[Any, Any]) -> JobFile:
    lines = {str(as_written(k)): k.start_mark.line + 1 for k, _ in node.value}
    env_lines = {
        str(as_written(k)): k.start_mark.line + 1
        for key, value in node.value
        if as_written(key) == "env" and isinstance(value, yaml.MappingNode)
        for k, _ in value.value
    }
    raw: dict[str, Any] = as_written(node)
    # maxRestarts is a number: taken typed (3, not "3"); everything else is text as written
    if "maxRestarts" in raw:
        raw["maxRestarts"] = typed.get("maxRestarts")
    if isinstance(raw.get("env"), dict):  # NAME: (nothing) is the empty string, as NAME= is
        raw["env"] = {k: "" if v is None else v for k, v in raw["env"].items()}

    def at(key: str) -> str:
        return f"{shown}: {key}"

    def line(key: str) -> str:
        if key.startswith("env."):
            number = env_lines.get(key.removeprefix("env."), 0)
        else:
            number = lines.get(key, 0)
        return f" (line {number})" if number else ""

    problems: list[Problem] = []
    for key in [k for k, v in raw.items() if v is None and k in KEYS]:
        problems.append(
            Problem(
                at(key),
                NOT_SET,
                f"{key} has no value{line(key)}",
                ALLOWED[key],
                f"remove {key}, or {write(key, EXAMPLES[key])}",
            )
        )
        del raw[key]
    try:
        model = JobFileModel.model_validate(raw)
    except ValidationError as error:
        problems += shape_problems(error, raw, typed, at, line)
        bad = {str(item["loc"][0]) for item in error.errors() if item["loc"]}
        good = {key: value for key, value in raw.items() if key in KEYS and key not in bad}
        if "env" in bad and isinstance(raw.get("env"), dict):
            # only some values are not strings: the names are still checked
            good["env"] = {k: flow_text(v) for k, v in raw["env"].items()}
        model = JobFileModel.model_validate(good)
    settings, meaning = meaning_problems(model, path, at, line)
    problems += meaning
    if problems:
        order = {f"{shown}: {key}": lines.get(key, 0) for key in lines}
        order |= {f"{shown}: env.{name}": number for name, number in env_lines.items()}
        problems.sort(key=lambda problem: order.get(problem.path, 0))
        raise JobFileError(shown, problems)
    return settings


ALLOWED = {
    "name": "1-40 lowercase letters, digits and '-', starting with a letter or digit",
    "command": "a list of strings, e.g. [python, train.py, --epochs, '3'], or one string "
    "split like a shell line",
    "workdir": "a folder, relative to the job file's folder",
    "setup": f"a shell command, or a list of lines (joined with newlines, run as one script), "
    f"at most {SETUP_MAX_BYTES} bytes",
    "image": "a container image, e.g. nvcr.io/nvidia/pytorch:24.10-py3 or "
    "<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>",
    "env": "a mapping of NAME: value; NAME upper-case letters, digits and '_', not starting "
    "with a digit, and not one the node sets itself",
    "maxRestarts": f"a whole number {MAX_RESTARTS[0]}-{MAX_RESTARTS[1]} (torchrun's restarts)",
}
EXAMPLES: dict[str, Any] = {
    "name": "train",
    "command": EXAMPLE_COMMAND,
    "workdir": ".",
    "setup": "pip install -r requirements.txt",
    "image": "nvcr.io/nvidia/pytorch:24.10-py3",
    "env": {"NCCL_DEBUG": "WARN"},
    "maxRestarts": 3,
}


def shape_problems(
    error: ValidationError, raw: dict[str, Any], typed: dict[Any, Any], at: Where, line: Where
) -> list[Problem]:
    """One problem per key pydantic refused (a union reports each branch: one is enough)."""
    problems: list[Problem] = []
    seen: set[str] = set()
    for item in error.errors():
        loc = tuple(str(part) for part in item["loc"])
        key = loc[0]
        if item["type"] == "extra_forbidden":
            # a number stays one where it is meant for maxRestarts (max_restarts: 5)
            value = typed.get(key) if closest(key, KEYS) == "maxRestarts" else raw[key]
            problems.append(unknown_key(key, value, at, line))
            continue
        if key == "env" and len(loc) > 1 and isinstance(raw.get("env"), dict):
            name = loc[1]
            if f"env.{name}" in seen:
                continue
            seen.add(f"env.{name}")
            value = raw["env"][name]
            fixed = {k: v if k != name else flow_text(v) for k, v in raw["env"].items()}
            problems.append(
                Problem(
                    at(f"env.{name}"),
                    value,
                    f"a variable's value is one string, not a {type(value).__name__}"
                    f"{line(f'env.{name}')}",
                    "a string (numbers and words are read as written)",
                    write("env", fixed),
                )
            )
            continue
        if key in seen:
            continue
        seen.add(key)
        problems.append(shape_problem(key, raw[key], item, at, line))
    return problems


def flow_text(value: Any) -> str:
    """A list or mapping given where one string belongs, as that string (compact YAML)."""
    return flow(value) if not isinstance(value, str) else value


def unknown_key(key: str, value: Any, at: Where, line: Where) -> Problem:
    meant = closest(key, KEYS)
    if meant is None:
        fix = f"remove {key} (a job file takes only {', '.join(KEYS)})"
    else:
        fix = f"{suggest(key, KEYS)}{write(meant, value)} in place of {key}"
    return Problem(at(key), value, f"unknown key '{key}'{line(key)}", ", ".join(KEYS), fix)


def shape_problem(key: str, value: Any, item: ErrorDetails, at: Where, line: Where) -> Problem:
    kind = type(value).__name__
    where = line(key)
    if key == "maxRestarts":
        if item["type"] in ("greater_than_equal", "less_than_equal"):
            bound = MAX_RESTARTS[0] if item["type"] == "greater_than_equal" else MAX_RESTARTS[1]
            return Problem(
                at(key),
                value,
                f"{value} is out of range{where}",
                ALLOWED[key],
                write(key, bound),
            )
        return Problem(
            at(key), value, f"not a whole number{where}", ALLOWED[key], write(key, number(value))
        )
    if key == "env":
        return Problem(at(key), value, f"not a mapping{where}", ALLOWED[key], env_fix(value))
    if key in ("command", "setup") and isinstance(value, list):
        fixed = [flow_text(part) for part in value]
        return Problem(
            at(key),
            value,
            f"each item is one string, not a list or mapping{where}",
            ALLOWED[key],
            write(key, fixed),
        )
    needed = "a list of strings or one string" if key in ("command", "setup") else "a string"
    return Problem(
        at(key), value, f"{needed} is needed, not a {kind}{where}", ALLOWED[key], example(key)
    )


def example(key: str) -> str:
    return write(key, EXAMPLES[key])


def number(value: Any) -> int:
    """A whole number in range, read from ``value`` where it holds one (3.0, '5', '5x')."""
    found = re.search(r"\d+", str(value)) if not isinstance(value, bool) else None
    if found is None:
        return int(EXAMPLES["maxRestarts"])
    return max(MAX_RESTARTS[0], min(MAX_RESTARTS[1], int(found.group())))


def env_fix(value: Any) -> str:
    """`env` given as a list of NAME=value strings: the same as a mapping."""
    if isinstance(value, list) and all(isinstance(v, str) and "=" in v for v in value) and value:
        return write("env", dict(v.split("=", 1) for v in value))
    return write("env", EXAMPLES["env"])


def meaning_problems(
    model: JobFileModel, path: Path, at: Where, line: Where
) -> tuple[JobFile, list[Problem]]:
    problems: list[Problem] = []
    name = model.name
    if name is not None and not JOB_NAME.match(name):
        problems.append(
            Problem(
                at("name"),
                name,
                f"not a job name (it names a systemd unit and an SSM parameter){line('name')}",
                ALLOWED["name"],
                write("name", job_name_like(name)),
            )
        )
    command = command_list(model.command, at, line, problems)
    workdir = workdir_path(model.workdir, path, at, line, problems)
    setup = None
    if model.setup is not None:
        setup = "\n".join(model.setup) if isinstance(model.setup, list) else model.setup
        if why := setup_issue(setup):
            problems.append(setup_problem(model.setup, why, at, line))
    if model.image is not None and (why := image_issue(model.image)):
        problems.append(image_problem(model.image, why, at, line))
    env = dict(model.env or {})
    renamed = {(env_name_like(k) if env_issue(k) else k): v for k, v in env.items()}
    for variable in env:
        if why := env_issue(variable):
            problems.append(
                Problem(
                    at(f"env.{variable}"),
                    variable,
                    f"{why}{line(f'env.{variable}')}",
                    ALLOWED["env"],
                    f"rename it (your code then reads {env_name_like(variable)}): "
                    + write("env", renamed),
                )
            )
    settings = JobFile(
        path=path,
        name=name,
        command=command,
        workdir=workdir,
        setup=setup,
        image=model.image,
        env=env,
        max_restarts=model.max_restarts,
    )
    return settings, problems


def command_list(
    value: str | list[str] | None, at: Where, line: Where, problems: list[Problem]
) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            command = shlex.split(value)
        except ValueError as error:
            guess = next((g for g in closed(value) if g), EXAMPLE_COMMAND)
            problems.append(
                Problem(
                    at("command"),
                    value,
                    f"it cannot be split like a shell line ({error}){line('command')}",
                    ALLOWED["command"],
                    f"close the quote; as a list: {write('command', guess)}",
                )
            )
            return None
    else:
        command = list(value)
    if not command or not command[0].strip():
        problems.append(
            Problem(
                at("command"),
                value,
                f"the command is empty{line('command')}",
                ALLOWED["command"],
                f"give the command to run: {write('command', EXAMPLE_COMMAND)}",
            )
        )
        return None
    return command


def closed(text: str) -> list[list[str]]:
    """The shell line with its open quote closed, both ways (the ones that split)."""
    found = []
    for quote in ("'", '"'):
        try:
            found.append(shlex.split(text + quote))
        except ValueError:
            continue
    return found


def workdir_path(
    value: str | None, path: Path, at: Where, line: Where, problems: list[Problem]
) -> Path | None:
    if value is None:
        return None
    base = path.parent
    folder = base / value
    if folder.is_dir():
        return folder
    problem = "it is a file, not a folder" if folder.exists() else f"no folder {folder}"
    siblings = (
        [p.name for p in folder.parent.iterdir() if p.is_dir()] if folder.parent.is_dir() else []
    )
    meant = closest(folder.name, siblings)
    if folder.exists():  # a file in the code's folder (the script): that folder
        fix = write("workdir", str(Path(value).parent))
    elif meant is not None:
        relative = str(Path(value).parent / meant)
        fix = f"{suggest(folder.name, siblings)}{write('workdir', relative)}"
    else:
        fix = (
            f"create the folder (mkdir -p {folder.resolve()}), or write the path of your code's "
            f"folder relative to {base.resolve()}"
        )
    problems.append(
        Problem(
            at("workdir"),
            value,
            f"{problem}{line('workdir')}",
            f"{ALLOWED['workdir']} ({base.resolve()})",
            fix,
        )
    )
    return None


def image_issue(image: str) -> str:
    """Why ``image`` is not an image reference ("" when it is; whether the stack can run it is
    gpuc run's check, against AWS)."""
    if not image.strip():
        return "the image is empty"
    try:
        parse_image(image)
    except ImageError as error:  # "gpuc run --image 'x': not a ... (why); write ..."
        return str(error).split(": ", 1)[-1].split("; write ", 1)[0]
    return ""


def image_problem(image: str, why: str, at: Where, line: Where) -> Problem:
    if not image.strip():
        fix = "remove image (the job runs in the AMI's own environment), or " + example("image")
    else:
        meant = re.sub(r"\s+", "", image).lower()
        fix = write("image", meant) if not image_issue(meant) else example("image")
    return Problem(at("image"), image, f"{why}{line('image')}", ALLOWED["image"], fix)


def setup_problem(value: str | list[str], why: str, at: Where, line: Where) -> Problem:
    if why.startswith("the setup command is empty"):
        fix = "remove setup (nothing runs before the job), or " + write("setup", EXAMPLES["setup"])
    else:
        fix = "move these commands into a script in the job's workdir, then " + write(
            "setup", "bash setup.sh"
        )
    return Problem(at("setup"), value, f"{why}{line('setup')}", ALLOWED["setup"], fix)
