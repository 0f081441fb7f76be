"""The gpu-cluster security pack: one control per Security Hub (or NIST) control id, run by
`pulumi preview --policy-pack policy` (CrossGuard, __main__.py) and by `gpuc audit`.
Imports nothing from the project and nothing from pulumi_policy outside __main__.py."""
