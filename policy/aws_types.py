"""The pulumi-aws resource types the controls check."""

INSTANCE = "aws:ec2/instance:Instance"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
VOLUME = "aws:ebs/volume:Volume"
SUBNET = "aws:ec2/subnet:Subnet"
VPC = "aws:ec2/vpc:Vpc"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"
DEFAULT_SG = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
EBS_DEFAULT_ENCRYPTION = "aws:ebs/encryptionByDefault:EncryptionByDefault"
SNAPSHOT_BLOCK_PUBLIC_ACCESS = "aws:ebs/snapshotBlockPublicAccess:SnapshotBlockPublicAccess"

BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
OWNERSHIP = "aws:s3/bucketOwnershipControls:BucketOwnershipControls"
ENCRYPTION = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
VERSIONING = (
    "aws:s3/bucketVersioning:BucketVersioning",
    "aws:s3/bucketVersioningV2:BucketVersioningV2",
)
LOGGING = ("aws:s3/bucketLogging:BucketLogging", "aws:s3/bucketLoggingV2:BucketLoggingV2")
LIFECYCLE = (
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2",
)

KMS_KEY = "aws:kms/key:Key"
ROLE = "aws:iam/role:Role"
INSTANCE_PROFILE = "aws:iam/instanceProfile:InstanceProfile"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
MANAGED_POLICY = "aws:iam/policy:Policy"
INLINE_POLICIES = (
    "aws:iam/rolePolicy:RolePolicy",
    "aws:iam/userPolicy:UserPolicy",
    "aws:iam/groupPolicy:GroupPolicy",
)
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
TRAIL = "aws:cloudtrail/trail:Trail"
SSM_PARAMETER = "aws:ssm/parameter:Parameter"
LISTENER = ("aws:lb/listener:Listener", "aws:alb/listener:Listener")
LOAD_BALANCER = ("aws:lb/loadBalancer:LoadBalancer", "aws:alb/loadBalancer:LoadBalancer")
WEB_ACL_ASSOCIATION = "aws:wafv2/webAclAssociation:WebAclAssociation"
FSX_LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
