"""The control table of docs/concepts/security.md, generated from the pack
(`python -m gpu_cluster.policy.table`)."""

from __future__ import annotations

from gpu_cluster.policy.pack import CONTROLS
from gpu_cluster.policy.suppressions import SUPPRESSIONS


def markdown() -> str:
    rows = ["| control | severity | checks | policy (CrossGuard) |", "|---|---|---|---|"]
    for c in CONTROLS:
        policy = f"`{c.name}`" + (" (gpuc audit only)" if c.audit_only else "")
        rows.append(f"| {c.id} | {c.severity} | {c.title} | {policy} |")
    rows += ["", "| suppressed control | on | why |", "|---|---|---|"]
    rows += [f"| `{s.control}` | `{s.resources}` | {s.why} |" for s in SUPPRESSIONS]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown())
