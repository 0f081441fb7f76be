"""A data store (bucket and KMS key, kept on destroy) and a Triton inference service on g5
nodes across two zones that reads its model repository from that bucket."""

import pulumi

from gpu_cluster import DataStore, DataStoreArgs, InferenceService, InferenceServiceArgs

config = pulumi.Config()

store = DataStore("models", DataStoreArgs(tags={"team": "serving"}))

service = InferenceService(
    "serve",
    InferenceServiceArgs(
        instance_type="g5.xlarge",
        inference={
            "availability_zones": ["us-east-1a", "us-east-1b"],
            "min_nodes": 2,
            "max_nodes": 4,
            "model_repository": "models/",
            "tls": {
                "domain": config.require("domain"),
                "hosted_zone_id": config.require("hostedZoneId"),
            },
            # who may call it: your office or VPN range (or API keys from
            # config.require_secret, OIDC or Cognito sign-in; "public": True for anyone)
            "access": {"cidrs": [config.require("callerCidr")]},
        },
        # the store's outputs, known at `pulumi up`: passed on as they are
        storage={
            "source": "existing",
            "bucket": store.bucket_name,
            "kms_key_arn": store.kms_key_arn,
        },
        tags={"team": "serving"},
    ),
)

pulumi.export("bucketName", store.bucket_name)
pulumi.export("url", service.url)
