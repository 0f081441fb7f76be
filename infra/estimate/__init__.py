"""`gpuc estimate`: what bounds a training step on a stack's cluster, and what an epoch costs."""
