"""The suite's own promises (README "Tests"): `-m "not slow"` leaves out harness nodes,
subprocesses, servers and whole-stack plans, and harness-node tests share one xdist group."""

from __future__ import annotations

import pytest

NODE_TESTS = (
    "tests/test_journey.py::test_a_users_whole_path",
    "tests/test_health_watch.py::test_no_running_job_no_wait",
)


def test_the_inner_loop_leaves_the_heavy_tests_out(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    heavy = {"moto_server", "make_node", "nodes", "cluster", "imds"}
    for item in items:
        if heavy & set(getattr(item, "fixturenames", ())):
            assert item.get_closest_marker("slow"), item.nodeid
    if request.config.getoption("markexpr") == "not slow":
        assert not any(heavy & set(getattr(i, "fixturenames", ())) for i in items)


@pytest.mark.parametrize("nodeid", NODE_TESTS)
def test_harness_node_tests_are_one_group_and_slow(nodeid: str, request: pytest.FixtureRequest):
    """Their marks as this session collected them (tests/conftest.py sets them)."""
    found = [i for i in request.session.items if i.nodeid.split("@")[0] == nodeid]
    if not found:
        pytest.skip(f"{nodeid} is not selected in this run (-m / -k)")
    (item,) = found
    group = item.get_closest_marker("xdist_group")
    assert item.get_closest_marker("slow") and group and group.args == ("nodes",)
