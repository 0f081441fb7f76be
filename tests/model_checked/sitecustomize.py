"""Loaded by every Python that the tests start with this folder on PYTHONPATH (conftest puts it
there, with BOTOCORE_LIMITS_RECORD): `gpuc` as a subprocess, the AWS CLI. Its botocore
requests are checked against the service model as the tests' own are
(tests/botocore_limits.py), and each refusal is written to the record file the test reads."""

import os
import sys

if os.environ.get("BOTOCORE_LIMITS_RECORD"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        import botocore_limits
    except ImportError:  # a Python without botocore (a build's isolated environment)
        pass
    else:
        botocore_limits.install()
    finally:
        sys.path.pop(0)
