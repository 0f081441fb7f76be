"""Benchmarks (never timed tests). Run them as scripts, e.g. ``python bench/plan_scale.py``."""
