"""The model's max is enforced on every boto3 request of the tests (tests/botocore_limits.py),
as AWS enforces it and botocore and moto do not."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ParamValidationError
from moto import mock_aws


@mock_aws
def test_a_value_over_the_models_max_is_refused_before_it_is_sent():
    ssm = boto3.client("ssm", region_name="us-east-1")
    ssm.put_parameter(Name="/" + "n" * 2047, Value="x", Type="String")  # at the max: sent
    with pytest.raises(ParamValidationError, match="valid max length: 2048"):
        ssm.put_parameter(Name="/" + "n" * 2048, Value="x", Type="String")


@mock_aws
def test_a_list_or_a_number_over_its_max_is_refused_too():
    ssm = boto3.client("ssm", region_name="us-east-1")
    with pytest.raises(ParamValidationError, match="valid max length: 10"):
        ssm.get_parameters(Names=[f"/p{i}" for i in range(11)])
    with pytest.raises(ParamValidationError, match="valid max value: 10"):
        ssm.get_parameters_by_path(Path="/", MaxResults=11)
