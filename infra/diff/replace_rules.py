"""Inputs whose change makes pulumi-aws replace the resource (the bridged Terraform
provider's ForceNew arguments), for the types a gpu-cluster stack declares.

Source: hashicorp/terraform-provider-aws, internal/service/<service>/<resource>.go (ForceNew)
- pulumi-aws is bridged from it, and a ForceNew argument is a replace in `pulumi preview`.
Anything not listed updates in place."""

from __future__ import annotations

from collections.abc import Callable

REPLACE_ON_CHANGE: dict[str, tuple[str, ...]] = {
    "aws:ec2/vpc:Vpc": ("cidrBlock", "ipv4IpamPoolId", "ipv4NetmaskLength"),
    "aws:ec2/subnet:Subnet": (
        "vpcId",
        "cidrBlock",
        "availabilityZone",
        "availabilityZoneId",
        "ipv4IpamPoolId",
        "ipv4NetmaskLength",
        "ipv6Native",
        "outpostArn",
    ),
    "aws:ec2/securityGroup:SecurityGroup": ("name", "namePrefix", "description", "vpcId"),
    # a rule also replaces when its source kind changes (cidrIpv4 -> referencedSecurityGroupId)
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("securityGroupId",),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": ("securityGroupId",),
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": ("vpcId",),
    "aws:ec2/routeTable:RouteTable": ("vpcId",),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("subnetId", "gatewayId"),
    "aws:ec2/internetGateway:InternetGateway": (),
    "aws:ec2/natGateway:NatGateway": (
        "allocationId",
        "subnetId",
        "connectivityType",
        "privateIp",
        "secondaryPrivateIpAddressCount",
    ),
    "aws:ec2/eip:Eip": ("domain", "publicIpv4Pool", "address", "ipamPoolId", "networkBorderGroup"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("vpcId", "serviceName", "vpcEndpointType"),
    "aws:ec2/flowLog:FlowLog": (
        "vpcId",
        "subnetId",
        "trafficType",
        "logDestination",
        "logDestinationType",
        "iamRoleArn",
        "maxAggregationInterval",
    ),
    "aws:ec2/placementGroup:PlacementGroup": ("name", "strategy", "partitionCount", "spreadLevel"),
    "aws:ec2/launchTemplate:LaunchTemplate": ("name", "namePrefix"),
    # instanceType, userData and userDataBase64 change in place by stopping and starting the
    # instance; launchTemplate's version replaces it only once state holds a numeric version
    # that differs from the template's $Default (CustomizeDiff, after a refresh).
    "aws:ec2/instance:Instance": (
        "ami",
        "associatePublicIpAddress",
        "availabilityZone",
        "cpuCoreCount",
        "cpuThreadsPerCore",
        "ebsOptimized",
        "ebsBlockDevices",
        "ephemeralBlockDevices",
        "hibernation",
        "hostId",
        "ipv6AddressCount",
        "ipv6Addresses",
        "keyName",
        "launchTemplate",
        "networkInterfaces",
        "placementGroup",
        "placementPartitionNumber",
        "privateIp",
        "securityGroups",
        "subnetId",
        "tenancy",
    ),
    # min/max/desired, template version, mixed instances policy, placement group and subnets
    # all change in place (one UpdateAutoScalingGroup call); running instances keep theirs.
    "aws:autoscaling/group:Group": ("name", "namePrefix", "initialLifecycleHooks"),
    "aws:ec2/capacityReservation:CapacityReservation": (
        "availabilityZone",
        "ebsOptimized",
        "ephemeralStorage",
        "instanceMatchCriteria",
        "instancePlatform",
        "instanceType",
        "tenancy",
    ),
    "aws:kms/key:Key": (
        "customerMasterKeySpec",
        "keyUsage",
        "multiRegion",
        "customKeyStoreId",
        "xksKeyId",
    ),
    "aws:kms/alias:Alias": ("name", "namePrefix"),
    "aws:s3/bucket:Bucket": ("bucket", "bucketPrefix", "objectLockEnabled"),
    "aws:iam/role:Role": ("name", "namePrefix", "path"),
    "aws:iam/rolePolicy:RolePolicy": ("name", "namePrefix", "role"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("role", "policyArn"),
    "aws:iam/instanceProfile:InstanceProfile": ("name", "namePrefix", "path"),  # role: in place
    "aws:iam/serviceLinkedRole:ServiceLinkedRole": ("awsServiceName", "customSuffix"),
    "aws:cloudwatch/logGroup:LogGroup": ("name", "namePrefix", "logGroupClass"),
    "aws:cloudwatch/logResourcePolicy:LogResourcePolicy": ("policyName",),
    "aws:cloudwatch/eventRule:EventRule": ("name", "namePrefix", "eventBusName"),
    "aws:cloudwatch/eventTarget:EventTarget": ("rule", "targetId", "eventBusName"),
    "aws:cloudwatch/metricAlarm:MetricAlarm": ("alarmName",),
    # logs/metric_filter.go: name and log_group_name ForceNew; pattern and transformation a
    # PutMetricFilter in place
    "aws:cloudwatch/logMetricFilter:LogMetricFilter": ("name", "logGroupName"),
    # cloudwatch/dashboard.go: dashboard_name ForceNew; the body is a PutDashboard in place
    "aws:cloudwatch/dashboard:Dashboard": ("dashboardName",),
    "aws:autoscaling/policy:Policy": ("name", "autoscalingGroupName"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": (
        "backupId",
        "copyTagsToBackups",
        "deploymentType",
        "driveCacheType",
        "exportPath",
        "fileSystemTypeVersion",
        "importPath",
        "importedFileChunkSize",
        "kmsKeyId",
        "securityGroupIds",
        "storageType",
        "subnetIds",
    ),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (
        "fileSystemId",
        "fileSystemPath",
        "dataRepositoryPath",
    ),
    "aws:ssm/parameter:Parameter": ("name", "dataType"),
    # internal/service/s3/object.go: the boot bundle's key holds its digest, so a new bundle is
    # a new object, created before the old one goes (nodes running keep their installed copy)
    "aws:s3/bucketObjectv2:BucketObjectv2": ("bucket", "key"),
    "aws:scheduler/schedule:Schedule": ("name", "namePrefix", "groupName"),
    "aws:budgets/budget:Budget": ("name", "namePrefix", "accountId"),
    "aws:sns/topic:Topic": ("name", "namePrefix", "fifoTopic"),
    "aws:cloudtrail/trail:Trail": ("name",),
    # the inference stage
    "aws:lb/loadBalancer:LoadBalancer": ("name", "namePrefix", "internal", "loadBalancerType"),
    "aws:lb/targetGroup:TargetGroup": (
        "name",
        "namePrefix",
        "port",
        "protocol",
        "protocolVersion",
        "targetType",
        "vpcId",
    ),
    "aws:lb/listener:Listener": ("loadBalancerArn",),
    # wafv2/web_acl.go (name, name_prefix, scope), web_acl_association.go (both arguments: the
    # resource has no update), web_acl_logging_configuration.go (log_destination_configs,
    # resource_arn; redacted fields and filters update in place with PutLoggingConfiguration)
    "aws:wafv2/webAcl:WebAcl": ("name", "namePrefix", "scope"),
    "aws:wafv2/webAclAssociation:WebAclAssociation": ("resourceArn", "webAclArn"),
    "aws:wafv2/webAclLoggingConfiguration:WebAclLoggingConfiguration": (
        "logDestinationConfigs",
        "resourceArn",
    ),
    "aws:acm/certificate:Certificate": (
        "domainName",
        "subjectAlternativeNames",
        "validationMethod",
        "keyAlgorithm",
    ),
    "aws:acm/certificateValidation:CertificateValidation": (
        "certificateArn",
        "validationRecordFqdns",
    ),
    # type and set_identifier update in place (route53/record.go resourceRecordUpdate: one
    # DELETE+CREATE change batch); provider 6.x briefly forced a new record on type
    # (hashicorp/terraform-provider-aws#43500), reverted by #47105
    "aws:route53/record:Record": ("zoneId", "name"),
    "aws:sns/topicSubscription:TopicSubscription": ("topic", "protocol", "endpoint"),
    "aws:budgets/budgetAction:BudgetAction": ("accountId", "actionType", "budgetName"),
    # a new tagKey activates that key in place (ce/cost_allocation_tag.go; the old one stays on)
    "aws:costexplorer/costAllocationTag:CostAllocationTag": (),
    "aws:ebs/encryptionByDefault:EncryptionByDefault": (),
    "aws:ebs/snapshotBlockPublicAccess:SnapshotBlockPublicAccess": (),
    "aws:sns/topicPolicy:TopicPolicy": ("arn",),
    # S3 bucket sub-resources: one of each per bucket (s3/bucket_*.go)
    "aws:s3/bucketPolicy:BucketPolicy": ("bucket",),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        "bucket",
        "expectedBucketOwner",
    ),
    "aws:s3/bucketLogging:BucketLogging": ("bucket", "expectedBucketOwner"),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": ("bucket",),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": ("bucket",),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "bucket",
        "expectedBucketOwner",
    ),
    "aws:s3/bucketVersioning:BucketVersioning": ("bucket", "expectedBucketOwner"),
    # pulumiverse/pulumi-time (terraform-provider-time resource_sleep.go: triggers RequiresReplace)
    "time:index/sleep:Sleep": ("triggers",),
}


def _decreased(old: object, new: object) -> bool:
    return isinstance(old, int | float) and isinstance(new, int | float) and new < old


# Inputs that replace the resource only for some changes (the provider's CustomizeDiff).
REPLACE_WHEN: dict[str, dict[str, Callable[[object, object], bool]]] = {
    # fsx/lustre_file_system.go resourceLustreFileSystemStorageCapacityCustomizeDiff: a smaller
    # storage_capacity forces a new file system (PERSISTENT_2 only grows in place; SCRATCH_1,
    # which this project does not create, replaces on any change), and it starts empty
    "aws:fsx/lustreFileSystem:LustreFileSystem": {"storageCapacity": _decreased},
}
