"""`gpuc audit`: the security pack (policy/) over a stack's offline plan."""
