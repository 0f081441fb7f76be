"""A training cluster in your own VPC: gpu-cluster creates the nodes, their security group, KMS
key, IAM and data bucket, and none of the VPC, subnets, routes or gateways."""

import pulumi

from gpu_cluster import GpuCluster, GpuClusterArgs

config = pulumi.Config()

cluster = GpuCluster(
    "train",
    GpuClusterArgs(
        instance_type="p4d.24xlarge",
        nodes=config.get_int("nodes") or 4,
        availability_zone="us-east-1a",
        network={
            "vpc_id": config.require("vpcId"),
            "subnet_ids": [config.require("subnetId")],
            "security_group_ids": config.get_object("securityGroupIds") or [],
        },
        storage={"source": "create"},  # the bucket is kept (retained) on `pulumi destroy`
        idle_stop={"minutes": 60},
        tags={"team": "ml-platform"},
    ),
)

pulumi.export("nodeGroupName", cluster.node_group_name)
pulumi.export("bucketName", cluster.bucket_name)
pulumi.export("torchrunCommand", cluster.job_command)
pulumi.export("totalGpus", cluster.total_gpus)
pulumi.export("estimatedUsdPerHour", cluster.estimated_usd_per_hour)
