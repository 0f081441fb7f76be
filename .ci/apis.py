"""Check the code against the installed (oldest) packages, including paths no plan runs:

- every pulumi_aws / pulumiverse_time call (`aws.ec2.LaunchTemplate(...)`, `aws.get_..._output`)
  names a class or function the package has, each keyword is one of its arguments, and the keys
  of dict literals given to an argument are fields of its Args type (recursively);
- every AWS call through infra/aws (`call(client, "ec2", "DescribeX", **kwargs)`, `paginate`)
  names an operation botocore's service model has, and each keyword is one of its parameters.

Usage: python .ci/apis.py components infra (run by .ci/oldest in the oldest virtualenv).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path

import botocore
import botocore.session

PACKAGES = ("pulumi_aws", "pulumiverse_time")
# botocore/handlers.py, _add_parameter_aliases: boto3 takes the alias for the model's name
BOTOCORE_ALIASES = {("ec2", "Filters"): "Filter"}


def package_aliases(tree: ast.Module) -> dict[str, str]:
    """Names this file binds to the packages (`import pulumi_aws as aws`)."""
    return {
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name in PACKAGES
    }


def dotted(node: ast.AST) -> list[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def args_type(owner: object, annotation: object) -> type | None:
    match = re.search(r"(\w+Args)\b", str(annotation))
    if match is None:
        return None
    module = sys.modules[owner.__module__]
    found = getattr(module, match.group(1), None)
    if found is None:  # an Args type of the package the owner's module belongs to
        found = getattr(importlib.import_module(owner.__module__.rsplit(".", 1)[0]), match[1], None)
    return found


def parameters(target: object) -> dict[str, inspect.Parameter]:
    if inspect.isclass(target):
        target = getattr(target, "_internal_init", target.__init__)
    return dict(inspect.signature(target).parameters)


def dict_keys(where: str, args: type | None, node: ast.AST) -> list[str]:
    if isinstance(node, ast.List):
        return [p for element in node.elts for p in dict_keys(where, args, element)]
    if not isinstance(node, ast.Dict) or args is None:
        return []
    fields = parameters(args.__init__)
    problems = []
    for key, value in zip(node.keys, node.values, strict=True):
        if not isinstance(key, ast.Constant):
            continue
        if key.value not in fields:
            problems.append(f"{where}: {args.__name__} has no field {key.value!r}")
        else:
            problems += dict_keys(where, args_type(args, fields[key.value].annotation), value)
    return problems


CHECKED = {"pulumi": 0, "aws": 0}


def pulumi_problems(path: Path, tree: ast.Module) -> list[str]:
    aliases = package_aliases(tree)
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        parts = dotted(node.func)
        if not parts or parts[0] not in aliases:
            continue
        where = f"{path}:{node.lineno}: {'.'.join([aliases[parts[0]], *parts[1:]])}"
        CHECKED["pulumi"] += 1
        target: object = importlib.import_module(aliases[parts[0]])
        try:
            for part in parts[1:]:
                target = getattr(target, part)
        except AttributeError:
            problems.append(f"{where} does not exist")
            continue
        known = parameters(target)
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg == "opts":
                continue
            if keyword.arg not in known:
                problems.append(f"{where} has no argument {keyword.arg!r}")
            else:
                annotation = known[keyword.arg].annotation
                problems += dict_keys(where, args_type(target, annotation), keyword.value)
    return problems


def aws_problems(path: Path, tree: ast.Module, session: botocore.session.Session) -> list[str]:
    services = set(session.get_available_services())
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        texts = [a.value for a in node.args if isinstance(a, ast.Constant)]
        texts = [t for t in texts if isinstance(t, str)]
        pairs = [
            (texts[i], texts[i + 1])
            for i in range(len(texts) - 1)
            if texts[i] in services and texts[i + 1][:1].isupper()
        ]
        if not pairs:
            continue
        service, operation = pairs[0]
        model = session.get_service_model(service)
        where = f"{path}:{node.lineno}: {service}.{operation}"
        CHECKED["aws"] += 1
        if operation not in model.operation_names:
            problems.append(f"{where} is not an operation of botocore {botocore.__version__}")
            continue
        shape = model.operation_model(operation).input_shape
        members = set(shape.members) if shape else set()
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg in members:
                continue
            if BOTOCORE_ALIASES.get((service, keyword.arg)) not in members:
                problems.append(f"{where} has no parameter {keyword.arg}")
    return problems


def main(roots: list[str]) -> int:
    session = botocore.session.get_session()
    problems = []
    files = [path for root in roots for path in sorted(Path(root).rglob("*.py"))]
    for path in files:
        tree = ast.parse(path.read_text())
        problems += pulumi_problems(path, tree) + aws_problems(path, tree, session)
    for problem in problems:
        print(f"oldest: {problem}")
    print(
        f"oldest: {CHECKED['pulumi']} pulumi_aws/pulumiverse_time calls and {CHECKED['aws']} "
        f"AWS calls checked against the installed packages (botocore {botocore.__version__})"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["components", "infra"]))
