"""gpu-cluster components: reusable Pulumi ComponentResources and pure helpers."""
