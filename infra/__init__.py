"""gpu-cluster application: stack config, the Pulumi program, the offline plan, AWS tooling."""
