"""The gpuc pages: every command and flag (infra/cli.py's parser), every exit code, every
audit control."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from gpu_cluster.infra.reference.markdown import (
    GENERATED,
    cell,
    slug,
)


def subcommands(
    parser: argparse.ArgumentParser, prefix: str = "gpuc"
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """(`gpuc capacity-block offerings`, its parser, its help) for every command, depth first."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            full = f"{prefix} {name}"
            yield full, sub, helps.get(name, "")
            yield from subcommands(sub, full)


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """A command's own arguments (not -h, not its subcommands)."""
    return [
        a
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


def _repeatable(action: argparse.Action) -> bool:
    from gpu_cluster.infra.overrides import OverrideAction

    kinds = (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction)
    return isinstance(action, (*kinds, OverrideAction))


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _metavar(action: argparse.Action) -> str:
    if action.choices is not None and action.metavar is None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    metavar = action.metavar
    if isinstance(metavar, tuple):  # pragma: no cover - gpuc uses none
        return " ".join(metavar)
    if metavar:
        return str(metavar)
    return action.dest if not action.option_strings else action.dest.upper()


def _synopsis(command: str, parser: argparse.ArgumentParser) -> str:
    parts = [command]
    for action in arguments(parser):
        if isinstance(action, argparse._VersionAction):
            parts.append(f"[{action.option_strings[0]}]")
            continue
        if not action.option_strings:
            if action.nargs == argparse.REMAINDER:
                parts.append(f"[{_metavar(action)}]")
            elif action.nargs in ("*", "?"):
                parts.append(f"[{_metavar(action)} ...]")
            else:
                parts.append(_metavar(action))
            continue
        flag = action.option_strings[0]
        text = f"{flag} {_metavar(action)}" if _takes_value(action) else flag
        if _repeatable(action):
            text += " ..."
        parts.append(text if action.required else f"[{text}]")
    if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
        parts.append("COMMAND")
    return " ".join(parts)


def _default(action: argparse.Action) -> str:
    if action.required or not _takes_value(action) or isinstance(action, argparse._VersionAction):
        return ""
    if action.default in (None, [], argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | value | default | description |", "|---|---|---|---|"]
    for action in arguments(parser):
        names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{_metavar(action)}`"
        value = f"`{_metavar(action)}`" if action.option_strings and _takes_value(action) else ""
        notes = []
        if action.required and action.nargs not in ("*", "?", argparse.REMAINDER):
            notes.append("required")
        if _repeatable(action) and "repeatable" not in (action.help or ""):
            notes.append("repeatable")
        if isinstance(action, argparse._VersionAction):
            help_text = "print gpuc's version and exit"
        else:
            help_text = action.help or ""
        if action.help == argparse.SUPPRESS:
            continue
        text = " ".join([help_text, *(f"({note})" for note in notes)]).strip()
        rows.append(f"| {names} | {cell(value)} | {cell(_default(action))} | {cell(text)} |")
    return rows


def cli_markdown() -> str:
    from gpu_cluster.infra.cli import parser as build_parser

    root = build_parser()
    lines = [
        "# gpuc commands",
        "",
        GENERATED.format(source="the argparse parser of `infra/cli.py`"),
        f"`gpuc` is installed with the package. {root.description}. Each command's exit code is "
        "one of the [exit codes](exit-codes.md); `--json` makes a command print a JSON document, "
        "errors included.",
        "",
        "```",
        _synopsis("gpuc", root),
        "```",
        "",
    ]
    lines += _argument_rows(root)
    lines += ["", "| command | what it does |", "|---|---|"]
    commands = list(subcommands(root))
    for name, _, help_text in commands:
        lines.append(f"| [`{name}`](#{slug(name)}) | {cell(help_text)} |")
    for name, sub, help_text in commands:
        description = sub.description or help_text
        lines += ["", f"## {name}", "", description, "", "```", _synopsis(name, sub), "```", ""]
        if arguments(sub):
            lines += _argument_rows(sub)
        nested = [n for n, _, _ in subcommands(sub) if n.count(" ") == name.count(" ") + 1]
        if nested:
            lines += ["", "Commands: " + ", ".join(f"[`{n}`](#{slug(n)})" for n in nested)]
    return "\n".join(lines) + "\n"


def exit_codes() -> list[tuple[int, str, str]]:
    """(code, name, meaning) of every `gpuc` exit code (infra/problems.py EXIT_CODES)."""
    from gpu_cluster.infra.problems import EXIT_CODES

    return [(code, name, meaning) for code, (name, meaning) in sorted(EXIT_CODES.items())]


def exit_codes_markdown() -> str:
    lines = [
        "# Exit codes",
        "",
        GENERATED.format(source="`infra/problems.py` (EXIT_CODES)"),
        "Every `gpuc` command ends with one of these. With `--json`, a failure is also printed "
        'as `{"error": {"code": ..., "message": ..., "problems": [...]}}` on stdout.',
        "",
        "| code | name | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| {code} | `{name}` | {cell(meaning)} |" for code, name, meaning in exit_codes()]
    return "\n".join(lines) + "\n"


def audit_markdown() -> str:
    from gpu_cluster.policy.pack import CONTROLS
    from gpu_cluster.policy.suppressions import SUPPRESSIONS

    lines = [
        "# Audit controls",
        "",
        GENERATED.format(source="the security pack, `policy/`"),
        "`gpuc audit --stack NAME` plans the stack offline and runs every control over the "
        "plan; a failing control makes it exit 5 (`FINDINGS`). The same controls run under "
        "`pulumi preview --policy-pack policy` (CrossGuard), except those marked *gpuc audit "
        "only*. Ids are the AWS Foundational Security Best Practices ones, or NIST 800-53.",
        "",
        "| control | severity | what it checks | on | fix | policy (CrossGuard) |",
        "|---|---|---|---|---|---|",
    ]
    for c in CONTROLS:
        on = ", ".join(f"`{t}`" for t in c.types)
        policy = f"`{c.name}`" + (f" (gpuc audit only: {c.audit_only})" if c.audit_only else "")
        lines.append(
            f"| {c.id} | {c.severity} | {cell(c.title)} | {on} | {cell(c.fix)} | {cell(policy)} |"
        )
    lines += [
        "",
        "## Suppressions",
        "",
        "Where a control cannot hold by design, it is suppressed on the named resources only, "
        "and `gpuc audit` reports it as *suppressed* with the reason.",
        "",
        "| control | on resources | why |",
        "|---|---|---|",
    ]
    lines += [f"| `{s.control}` | `{s.resources}` | {cell(s.why)} |" for s in SUPPRESSIONS]
    return "\n".join(lines) + "\n"
