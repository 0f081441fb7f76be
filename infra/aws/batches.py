"""How many ids one AWS request takes, and the batches a longer list is sent in.

Each size is the service model's `max` of the member (botocore/data/<service>/<version>/
service-2.json), which AWS enforces with a ValidationException and botocore does not check:
- SSM SendCommand and CancelCommand, `InstanceIds` (shape InstanceIdList): at most 50
  (Systems Manager API reference, SendCommand: "InstanceIds ... Maximum number of 50 items");
- SSM DescribeInstanceInformation, `Filters[].Values` (InstanceInformationFilterValueSet):
  at most 100 (API reference, InstanceInformationStringFilter: "Values ... Maximum number of
  100 items").
A cluster past these sizes (a 64-node training stack) is sent in several requests; each
caller keeps the answers of every batch and reports the batch that failed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

SEND_COMMAND_INSTANCE_IDS = 50
INSTANCE_INFORMATION_FILTER_VALUES = 100

T = TypeVar("T")


def chunks(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """``items`` in order, ``size`` at a time (the last batch may be shorter; none when empty)."""
    if size < 1:
        raise ValueError(f"a batch holds at least one item, not {size}")
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
