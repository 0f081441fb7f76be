"""`gpuc` exit codes (docs/troubleshooting.md) and errors as JSON documents with --json."""

from __future__ import annotations

import json

import pytest

from gpu_cluster.infra import cli
from gpu_cluster.infra.outcome import AWS, FINDINGS, INPUT, INTERNAL, OK, USAGE


def test_exit_codes_are_distinct_and_documented():
    from conftest import ROOT

    assert len({OK, INTERNAL, USAGE, INPUT, AWS, FINDINGS}) == 6
    page = (ROOT / "docs" / "troubleshooting.md").read_text()
    for code in (INTERNAL, USAGE, INPUT, AWS, FINDINGS):
        assert f"| {code} |" in page


def test_input_errors_share_one_code(capsys, tmp_path, monkeypatch):
    assert cli.main(["plan", "--stack", "nope"]) == INPUT  # missing stack file
    bad = {"aws:region": "us-east-1", "gpu-cluster:nodez": "3"}
    monkeypatch.setattr("gpu_cluster.infra.stack_files.load_stack_config", lambda *a, **k: bad)
    assert cli.main(["plan", "--stack", "train"]) == INPUT  # configuration problems
    assert "unknown key 'nodez'" in capsys.readouterr().err


def test_usage_errors_are_argparses_code(capsys):
    assert cli.main(["plan"]) == USAGE  # --stack missing
    assert "gpuc plan: error: the following arguments are required" in capsys.readouterr().err


def test_an_unknown_flag_shows_its_own_subcommands_usage(capsys):
    assert cli.main(["plan", "--stack", "train", "--bogus"]) == USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: gpuc plan ") and "unrecognized arguments: --bogus" in err


def test_a_usage_error_with_json_is_json(capsys):
    assert cli.main(["cost", "--stack", "dev", "--json", "--hours-per-day", "30"]) == USAGE
    document = json.loads(capsys.readouterr().out)
    assert document["error"]["code"] == USAGE and "--hours-per-day" in document["error"]["message"]


@pytest.mark.parametrize("stack", ["train", "nope"])
def test_json_into_a_closed_pipe_is_not_a_traceback(stack):
    import subprocess
    import sys

    from conftest import ROOT

    done = subprocess.run(
        f"{sys.executable} -m infra.cli plan --stack {stack} --json | head -c 1",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_an_unexpected_exception_is_an_internal_error_message(monkeypatch, capsys):
    def broken(_args):
        raise KeyError("boom")

    monkeypatch.delenv("GPUC_DEBUG", raising=False)
    monkeypatch.setattr(cli, "cmd_plan", broken)
    assert cli.main(["plan", "--stack", "train"]) == INTERNAL
    err = capsys.readouterr().err
    assert "internal error (KeyError" in err and "please report" in err
    assert "Traceback" not in err


def test_json_errors_are_a_json_document_on_stdout(capsys, monkeypatch):
    assert cli.main(["cost", "--stack", "nope", "--json"]) == INPUT
    assert "no stack 'nope'" in json.loads(capsys.readouterr().out)["error"]["message"]
    bad = {"aws:region": "us-east-1", "gpu-cluster:nodez": "3"}
    monkeypatch.setattr("gpu_cluster.infra.stack_files.load_stack_config", lambda *a, **k: bad)
    assert cli.main(["plan", "--stack", "train", "--json"]) == INPUT
    document = json.loads(capsys.readouterr().out)
    assert document["error"]["code"] == INPUT
    paths = {p["path"] for p in document["error"]["problems"]}
    assert "gpu-cluster:nodez" in paths


def test_an_internal_error_without_text_names_only_its_kind(monkeypatch, capsys):
    def broken(_args):
        raise ValueError

    monkeypatch.delenv("GPUC_DEBUG", raising=False)
    monkeypatch.setattr(cli, "cmd_plan", broken)
    assert cli.main(["plan", "--stack", "train"]) == INTERNAL
    err = capsys.readouterr().err
    assert "internal error (ValueError); this is a bug in gpuc" in err
