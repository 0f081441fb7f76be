"""Offline plan: infra/__main__.py under the Pulumi SDK mock engine (the tests' harness too)."""
