"""One output contract (issue 29): every `gpuc` command that prints a result has --json; what it
prints parses as JSON; every key at every depth is camelCase (as Pulumi's own JSON), except the
mappings listed in DATA_KEYS, whose keys are data; the exit code is the one infra/problems.py's
EXIT_CODES table gives the situation (and an error document carries the same code). An endpoint
whose answer is not AWS's is "could not look" (exit 4), never an empty list; an unknown --region
is refused before any call (exit 3) with a did-you-mean."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from boto3.session import Session
from botocore.stub import Stubber
from foreign_answers import answering_server
from moto import mock_aws
from test_aws_commands import OFFERINGS, pricing_filters, product
from test_jobs import capture_sends, cluster_key, nodes
from test_jobs_cli import stored_job
from test_sweep import tags

from gpu_cluster.infra import cli
from gpu_cluster.infra.aws import capacity_blocks, price_refresh
from gpu_cluster.infra.problems import AWS, EXIT_CODES, FINDINGS, INPUT, OK, USAGE
from gpu_cluster.infra.reference.commands import subcommands

CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
# The mappings whose keys are data, not field names, each with why: the path of the mapping
# from the document's root, "." + key for each key passed, "[]" for a list's items.
DATA_KEYS: dict[str, str] = {
    ".config": "stack config keys, as `pulumi preview --json` prints them (gpu-cluster:nodes)",
    ".outputs.vcpuQuotasNeeded": "EC2 vCPU quota names, Service Quotas' own",
    ".steps[].newState.inputs.tags": "AWS tag keys (Name, gpu-cluster:stack-id)",
    ".steps[].newState.inputs.tagSpecifications[].tags": "AWS tag keys",
    ".steps[].newState.inputs.dimensions": "CloudWatch dimension names (InstanceId)",
    ".changes[].inputs": "property paths, as the keys of Pulumi's detailedDiff",
    ".epoch": "data sources (S3, FSx for Lustre, NVMe RAID)",
    ".read": "data sources (S3, FSx for Lustre, NVMe RAID)",
    ".nodes": "instance ids (a job's report per node)",
    "[].nodes": "instance ids (a job's report per node)",
    ".failedAtOnce": "instance ids",
    ".env": "environment variable names",
    "[].env": "environment variable names",
    ".spec.env": "environment variable names",
    ".request": "the CreateCapacityReservation request as the EC2 API spells it",
    ".request.*[]": "its TagSpecifications, as the EC2 API spells them",
    ".request.*[].*[]": "their Tags (Key, Value), as the EC2 API spells them",
}


def key_problems(document: Any, path: str = "") -> list[str]:
    """Every key that is neither camelCase nor inside a DATA_KEYS mapping, with its path."""
    found = []
    if isinstance(document, dict):
        data = path in DATA_KEYS
        for key, value in document.items():
            if not data and not CAMEL.match(str(key)):
                found.append(f"{path}.{key}")
            found += key_problems(value, f"{path}.*" if data else f"{path}.{key}")
    elif isinstance(document, list):
        for item in document:
            found += key_problems(item, f"{path}[]")
    return found


@pytest.mark.parametrize(
    ("document", "bad"),
    [
        ({"usd_per_hour": 1}, [".usd_per_hour"]),
        ({"rows": [{"InstanceType": "x"}]}, [".rows[].InstanceType"]),
        (
            {"config": {"gpu-cluster:nodes": "4"}, "ok": {"not applicable": 1}},
            [".ok.not applicable"],
        ),
        # a data key's value is a document again: its own keys are held to camelCase
        ({"env": {"NCCL_DEBUG": {"inner_key": 1}}}, [".env.*.inner_key"]),
        ({"env": {"NCCL_DEBUG": "INFO"}}, []),
    ],
)
def test_the_key_check_finds_what_it_should(document, bad):
    assert key_problems(document) == bad


def test_every_data_key_allowance_says_why():
    assert all(why.strip() for why in DATA_KEYS.values())


# --- the commands ----------------------------------------------------------------------------


def nothing(_monkeypatch: pytest.MonkeyPatch, _tmp: Path) -> None:
    pass


def fleet(monkeypatch: pytest.MonkeyPatch, _tmp: Path) -> None:
    """Two running nodes of stack train, its key, SSM sends recorded."""
    nodes("train", 2)
    cluster_key("train")
    capture_sends(monkeypatch)


def a_job(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
    """The fleet with a job `pretrain` and a line of its output."""
    fleet(monkeypatch, tmp)
    stored_job()
    logs = boto3.client("logs", region_name="us-east-1")
    ec2 = boto3.client("ec2", region_name="us-east-1")
    node = ec2.describe_instances()["Reservations"][0]["Instances"][0]["InstanceId"]
    logs.create_log_group(logGroupName="/gpu-cluster/train-jobs")
    logs.create_log_stream(logGroupName="/gpu-cluster/train-jobs", logStreamName=node)
    logs.put_log_events(
        logGroupName="/gpu-cluster/train-jobs",
        logStreamName=node,
        logEvents=[{"timestamp": int(time.time() * 1000), "message": "[pretrain] step 1"}],
    )


def a_leftover(_monkeypatch: pytest.MonkeyPatch, _tmp: Path) -> None:
    """An EBS volume stack train left behind."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    ec2.create_volume(
        AvailabilityZone="us-east-1a", Size=10, TagSpecifications=tags("train", "volume")
    )


def offerings(monkeypatch: pytest.MonkeyPatch, _tmp: Path) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(ec2)
    stub.add_response("describe_capacity_block_offerings", OFFERINGS, None)
    stub.activate()
    monkeypatch.setattr(capacity_blocks, "client", lambda *args, **kwargs: ec2)


def bought(monkeypatch: pytest.MonkeyPatch, _tmp: Path) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(ec2)
    reservation = {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "InstanceType": "p4d.24xlarge",
        "AvailabilityZone": "us-east-1c",
    }
    stub.add_response("purchase_capacity_block", {"CapacityReservation": reservation}, None)
    stub.activate()
    monkeypatch.setattr(capacity_blocks, "client", lambda *args, **kwargs: ec2)


def priced(monkeypatch: pytest.MonkeyPatch, _tmp: Path) -> None:
    """The Pricing API stubbed (moto has none); spot history from moto."""
    pricing = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(pricing)
    stub.add_response(
        "get_products",
        {"PriceList": [product("p4d.24xlarge", "21.9576")]},
        {"ServiceCode": "AmazonEC2", "Filters": pricing_filters("us-east-1")},
    )
    stub.activate()
    real = price_refresh.client
    monkeypatch.setattr(
        price_refresh,
        "client",
        lambda service, region, session=None: (
            pricing if service == "pricing" else real(service, region, session)
        ),
    )


@dataclass(frozen=True)
class Run:
    """One command line (--json added), what it needs first, and the exit code it must end with."""

    argv: tuple[str, ...]
    code: int
    setup: Callable[[pytest.MonkeyPatch, Path], None] = nothing
    lines: bool = False  # JSON Lines (one object a line): `gpuc logs`
    why: str = field(default="", compare=False)

    @property
    def command(self) -> str:
        words = [word for word in self.argv if not word.startswith("-")]
        return " ".join(["gpuc", *words[: 2 if words[0] in GROUPS else 1]])


GROUPS = ("capacity-block", "catalog", "prices")
TRAIN = ("--stack", "train")
IN_30_DAYS = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
RUNS = [
    Run(("plan", *TRAIN), OK),
    Run(("plan", "--stack", "data"), OK),
    Run(("plan", "--stack", "nope"), INPUT, why="no such stack file"),
    Run(("plan", *TRAIN, "--set", "nodez=3"), INPUT, why="an unknown key"),
    Run(("diff", "dev", "train"), OK),
    Run(("audit", *TRAIN), OK),
    Run(("stacks",), OK),
    Run(("cost", *TRAIN), OK),
    Run(("cost", "--stack", "inference"), OK),
    Run(("estimate", *TRAIN, "--model-params", "7e9"), OK),
    Run(("preflight", *TRAIN), FINDINGS, why="moto has no GPU quota: a failed check is a finding"),
    Run(("status",), OK, fleet),
    Run(("sweep", *TRAIN), FINDINGS, a_leftover, why="leftovers are a finding to fix"),
    Run(("sweep", "--stack", "dev"), OK, why="nothing left"),
    Run(("sweep", *TRAIN, "--delete"), USAGE, a_leftover, why="not confirmed"),
    Run(("sweep", *TRAIN, "--delete", "--yes"), OK, a_leftover),
    Run(("run", *TRAIN, "--watch", "0", "--", "python", "train.py"), OK, fleet),
    Run(("run", *TRAIN, "--watch", "0", "--", "python", "train.py"), AWS, why="no node runs"),
    Run(("jobs", *TRAIN), OK, a_job),
    Run(("logs", *TRAIN, "--job", "pretrain"), OK, a_job, lines=True),
    Run(("logs", *TRAIN, "--job", "nope"), INPUT, a_job, why="no such job"),
    Run(("cancel", *TRAIN, "--job", "pretrain"), OK, a_job),
    Run(("nccl-test", *TRAIN), FINDINGS, fleet, why="moto runs no bench: no figure is a finding"),
    Run(("nccl-test", *TRAIN, "--pairwise"), AWS, why="no node runs"),
    Run(("resume", *TRAIN), OK),
    Run(("capacity-block", "offerings", *TRAIN, "--hours", "48"), OK, offerings),
    Run(("capacity-block", "purchase", "cb-0bbbbbbbbbbbbbbbb", "--yes"), OK, bought),
    Run(("capacity-block", "purchase", "cb-0bbbbbbbbbbbbbbbb"), USAGE, why="no --yes"),
    Run(("catalog", "list", "--gpu", "A100"), OK),
    Run(("catalog", "list", "--gpu", "A1OO"), INPUT, why="not a GPU model"),
    Run(("catalog", "refresh", "--region", "us-east-1", "--output", "{tmp}/catalog.json"), OK),
    Run(("prices", "refresh", "--region", "us-east-1", "--output", "{tmp}/prices.csv"), OK, priced),
    Run(("cost", *TRAIN, "--hours-per-day", "30"), USAGE, why="argparse refuses the value"),
    Run(("capacity-reservation", "--stack", "experiment", "--start", IN_30_DAYS), OK),
    Run(
        ("capacity-reservation", *TRAIN, "--start", IN_30_DAYS),
        INPUT,
        why="P types cannot be reserved ahead",
    ),
    Run(("capacity-reservation", "--stack", "experiment", "--start", "2020-01-01"), INPUT),
]


def leaf_commands() -> dict[str, Any]:
    """Every command that does something (not a group of commands), by its full name."""
    everything = list(subcommands(cli.parser()))
    groups = {name.rsplit(" ", 1)[0] for name, _, _ in everything}
    return {name: sub for name, sub, _ in everything if name not in groups}


def test_every_command_has_json_and_is_run_here():
    leaves = leaf_commands()
    assert len(leaves) >= 19, sorted(leaves)
    without = [name for name, sub in leaves.items() if "--json" not in sub._option_string_actions]
    assert without == []
    assert {run.command for run in RUNS} == set(leaves)


def documents(out: str, lines: bool) -> list[Any]:
    if lines:
        return [json.loads(line) for line in out.splitlines() if line.strip()]
    return [json.loads(out)]


def gpuc_json(run: Run, capsys: pytest.CaptureFixture[str], tmp: Path) -> tuple[int, list[Any]]:
    argv = [word.replace("{tmp}", str(tmp)) for word in run.argv]
    if "--" in argv:  # the job's command stays last
        at = argv.index("--")
        argv = [*argv[:at], "--json", *argv[at:]]
    else:
        argv.append("--json")
    code = cli.main(argv)
    out = capsys.readouterr().out
    try:
        return code, documents(out, run.lines)
    except json.JSONDecodeError as error:
        raise AssertionError(f"{' '.join(argv)} printed what is not JSON: {out[:500]}") from error


@pytest.mark.parametrize("run", RUNS, ids=lambda run: " ".join(run.argv[:4]))
def test_every_command_prints_camel_case_json_and_exits_as_the_table_says(
    run: Run, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    with mock_aws():
        run.setup(monkeypatch, tmp_path)
        code, printed = gpuc_json(run, capsys, tmp_path)
    assert code in EXIT_CODES
    assert code == run.code, (EXIT_CODES[code], printed)
    assert printed, "nothing printed"
    for document in printed:
        assert key_problems(document) == []
        is_error = isinstance(document, dict) and set(document) == {"error"}
        assert is_error == (code not in (OK, FINDINGS)), document
        if is_error:
            assert document["error"]["code"] == code
            assert document["error"]["message"].strip()


# --- an endpoint that is not AWS ---------------------------------------------------------------

PROXY_PAGE = (
    b"<!DOCTYPE html><html><head><title>Sign in to the proxy</title></head>"
    b"<body><h1>Access to this site is blocked</h1></body></html>"
)
ANSWERS = {
    "a proxy's sign-in page": (200, "text/html", PROXY_PAGE),
    "a wrong URL's 404 page": (
        404,
        "text/html",
        b"<html><body><h1>404 Not Found</h1></body></html>",
    ),
    "a wrong URL's plain 404": (404, "text/plain", b"Not Found"),
    "a web server's empty JSON": (200, "application/json", b"{}"),
}


@pytest.fixture(params=sorted(ANSWERS))
def foreign_endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    """An HTTP server on loopback that answers every request with the same non-AWS answer."""
    status, content_type, body = ANSWERS[request.param]
    page = "#page" if body is PROXY_PAGE else ""  # a fragment: never sent, the test reads it
    with answering_server(status, content_type, body) as url:
        yield f"{url}{page}"


LOOKING = [  # every command that reads AWS, as a user runs it
    ("status",),
    ("sweep", *TRAIN),
    ("jobs", *TRAIN),
    ("cancel", *TRAIN, "--job", "pretrain"),
    ("logs", *TRAIN, "--job", "pretrain"),
    ("resume", *TRAIN),
    ("preflight", *TRAIN),
    ("capacity-block", "offerings", *TRAIN, "--hours", "48"),
    ("catalog", "refresh", "--region", "us-east-1", "--output", "{tmp}/catalog.json"),
    ("run", *TRAIN, "--watch", "0", "--", "python", "train.py"),
]


@pytest.mark.parametrize("argv", LOOKING, ids=lambda argv: " ".join(argv[:2]))
def test_an_answer_that_is_not_aws_is_could_not_look_never_an_empty_result(
    argv, foreign_endpoint, monkeypatch, capsys, tmp_path
):
    monkeypatch.setenv("AWS_ENDPOINT_URL", foreign_endpoint)
    run = Run(argv, AWS)
    code, (document,) = gpuc_json(run, capsys, tmp_path)
    assert code == AWS, document
    assert set(document) == {"error"} and document["error"]["code"] == AWS
    message = document["error"]["message"]
    assert "<html" not in message.lower() and "<!doctype" not in message.lower()

    if foreign_endpoint.endswith("#page") and argv == ("status",):
        assert '"Sign in to the proxy"' in message  # the page named by its title, not pasted


# --- an unknown region -------------------------------------------------------------------------


def no_call(*_args: Any, **_kwargs: Any) -> None:
    raise AssertionError("an AWS client was made for an unknown region")


def region_commands() -> dict[str, list[str]]:
    """Every command with --region, with the rest of a command line that would run."""
    needs = {
        "gpuc run": [*TRAIN, "--", "python", "train.py"],
        "gpuc jobs": [*TRAIN],
        "gpuc logs": [*TRAIN, "--job", "pretrain"],
        "gpuc cancel": [*TRAIN, "--job", "pretrain"],
        "gpuc sweep": [*TRAIN],
        "gpuc nccl-test": [*TRAIN],
        "gpuc capacity-block purchase": ["cb-0bbbbbbbbbbbbbbbb", "--yes"],
    }
    return {
        name: needs.get(name, [])
        for name, sub in leaf_commands().items()
        if "--region" in sub._option_string_actions
    }


def test_the_region_commands_are_the_ones_expected():
    assert set(region_commands()) == {
        "gpuc run",
        "gpuc jobs",
        "gpuc logs",
        "gpuc cancel",
        "gpuc nccl-test",
        "gpuc status",
        "gpuc sweep",
        "gpuc capacity-block purchase",
        "gpuc catalog list",
        "gpuc catalog refresh",
        "gpuc prices refresh",
    }


@pytest.mark.parametrize(("typed", "meant"), [("us-east-9", "us-east-"), ("useast1", "us-east-1")])
@pytest.mark.parametrize("command", sorted(region_commands()))
def test_an_unknown_region_is_refused_before_any_call(command, typed, meant, monkeypatch, capsys):
    monkeypatch.setattr(Session, "client", no_call)
    words = command.split()[1:]
    rest = region_commands()[command]
    at = rest.index("--") if "--" in rest else len(rest)
    argv = [*words, *rest[:at], "--region", typed, "--json", *rest[at:]]
    assert cli.main(argv) == INPUT
    message = json.loads(capsys.readouterr().out)["error"]["message"]
    assert f"--region '{typed}' is not an AWS region; did you mean '{meant}" in message


def test_a_stack_files_unknown_region_is_refused_before_any_call(monkeypatch, capsys):
    monkeypatch.setattr(
        "gpu_cluster.infra.stack_files.load_stack_config",
        lambda stack, root=None: {"aws:region": "eu-wset-1"},
    )
    monkeypatch.setattr(Session, "client", no_call)
    assert cli.main(["status", "--stack", "train", "--json"]) == INPUT
    message = json.loads(capsys.readouterr().out)["error"]["message"]
    assert "aws:region 'eu-wset-1' (stacks/Pulumi.train.yaml) is not an AWS region" in message
    assert "did you mean 'eu-west-1'?" in message
