"""Print pip constraints pinning every runtime dependency of pyproject.toml to its declared
floor (`name>=X` -> `name==X`), so the oldest-versions run (.ci/oldest) installs exactly the
versions the project says it supports and cannot drift from them."""

import re
import sys
import tomllib
from pathlib import Path

path = Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml")
for requirement in tomllib.loads(path.read_text())["project"]["dependencies"]:
    match = re.match(r"\s*([A-Za-z0-9_.\-\[\]]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", requirement)
    if match is None:
        sys.exit(f"{path}: dependency {requirement!r} has no `>=` floor; give it one")
    name = match.group(1).split("[")[0]
    print(f"{name}=={match.group(2)}")
