"""`python -m build` makes an sdist and, from it, a wheel that installs one import name,
gpu_cluster, with everything a node and a plan need; the library planned from the wheel (not
from this checkout) works."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# one build at a time: `python -m build` writes the checkout's egg-info and build/ folders
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """`python -m build`: the sdist, then the wheel built from that sdist (in isolated
    environments with the build-system's setuptools)."""
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    return out


@pytest.fixture(scope="module")
def wheel(dist) -> Path:
    (path,) = dist.glob("gpu_cluster-*.whl")
    return path


def test_the_sdist_holds_the_repository_folders(dist):
    (sdist,) = dist.glob("gpu_cluster-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    base = names[0].split("/", 1)[0]
    for needed in (
        "pyproject.toml",
        "README.md",
        "gpu_cluster/__init__.py",
        "components/boot/gpu-cluster-jobs.sh",
        "infra/cli.py",
        "policy/pack.py",
    ):
        assert f"{base}/{needed}" in names, needed  # fmt: skip


def test_the_wheel_has_one_top_level_name_and_every_data_file(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    dist_info = next(t for t in top if t.endswith(".dist-info"))
    assert top == {"gpu_cluster", dist_info}  # no components, infra or policy of its own
    for needed in (
        "gpu_cluster/components/boot/gpu-cluster-jobs.sh",
        "gpu_cluster/components/boot/allreduce_bench.py",
        "gpu_cluster/components/data/gpu_catalog.json",
        "gpu_cluster/infra/cli.py",
        "gpu_cluster/policy/PulumiPolicy.yaml",
    ):
        assert needed in names, needed
    assert any(name.startswith("gpu_cluster/infra/data/") for name in names)
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert "gpuc = gpu_cluster.infra.cli:main" in entry_points


def test_the_installed_library_plans_a_stack_from_its_own_files(wheel, tmp_path):
    """The wheel unpacked where Python looks first, run away from this checkout: the modules
    and data come from the wheel, and there is no top-level `components` to import."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "Pulumi.yaml", project)
    shutil.copytree(ROOT / "stacks", project / "stacks")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gpu_cluster, gpu_cluster.components.catalog as c, importlib.util as u; "
            "print(c.__file__); print(u.find_spec('components'), u.find_spec('infra'))",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.returncode == 0, where.stderr
    module_file, missing = where.stdout.splitlines()
    assert module_file.startswith(str(site)) and missing == "None None"
    plan = subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", "plan", "--stack", "train", "--json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plan.returncode == 0, plan.stderr
    assert '"p4d.24xlarge"' in plan.stdout


def test_the_package_and_gpuc_report_one_version(capsys):
    import gpu_cluster
    from gpu_cluster.infra import cli

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"gpuc {gpu_cluster.__version__}"
    assert gpu_cluster.__version__[0].isdigit()


def test_the_wheel_installs_into_a_fresh_venv_and_plans_an_example(wheel, tmp_path):
    """pip installs the wheel with its dependencies (from the package index) into a new
    virtual environment; there, away from this checkout, it imports as gpu_cluster alone and
    `gpuc plan --program` plans an example."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    example = shutil.copytree(ROOT / "examples" / "training-in-existing-vpc", tmp_path / "mine")
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, importlib.util as u, gpu_cluster, json; "
            "files = m.files('gpu-cluster'); "
            "print(json.dumps({'top': sorted({str(f).split('/')[0] for f in files "
            "if not str(f).startswith('..')}), 'file': gpu_cluster.__file__, "
            "'others': [n for n in ('components', 'infra', 'policy') if u.find_spec(n)]}))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert [t for t in found["top"] if not t.endswith(".dist-info")] == ["gpu_cluster"]
    assert found["file"].startswith(str(venv)) and found["others"] == []
    plan = subprocess.run(
        [str(venv / "bin" / "gpuc"), "plan", "--program", str(example), "--stack", "dev", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert plan.returncode == 0, plan.stderr[-3000:]
    types = {s["newState"]["type"] for s in json.loads(plan.stdout)["steps"]}
    assert "aws:autoscaling/group:Group" in types and "aws:ec2/vpc:Vpc" not in types


MODULES = r"""
import importlib, json, os, pkgutil, sys
import gpu_cluster
root = os.path.dirname(os.path.realpath(gpu_cluster.__file__))
found = {}
for info in pkgutil.walk_packages(gpu_cluster.__path__, "gpu_cluster."):
    if info.name.rsplit(".", 1)[-1] == "__main__":  # entry points run the program on import
        continue
    module = importlib.import_module(info.name)
    found[info.name] = os.path.realpath(module.__file__)
print(json.dumps({"root": root, "modules": found}))
"""


def _modules(python: str, cwd: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """Every module under gpu_cluster, imported: its name and the file it came from, relative
    to the folder its gpu_cluster package lies in (the checkout's real folders for an editable
    install, site-packages for a wheel)."""
    done = subprocess.run(
        [python, "-c", MODULES], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    base = Path(found["root"]).parent
    return {
        name: os.path.relpath(path, base).replace("gpu_cluster/", "", 1)
        for name, path in found["modules"].items()
    }


def test_an_editable_install_and_the_wheel_import_the_same_modules(wheel, tmp_path):
    """This venv holds the project installed editable (pip install -e .), run away from the
    checkout so setuptools' finder resolves `gpu_cluster`, whose symlinked folders resolve the
    rest; the wheel unpacked has real folders. Same module names, same files."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    away = tmp_path / "away"
    away.mkdir()
    editable = _modules(sys.executable, away)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    installed = _modules(sys.executable, away, {**os.environ, **env})
    assert "gpu_cluster.infra.cli" in editable and "gpu_cluster.components.cluster" in editable
    assert editable == installed
    # the editable install's files are the checkout's own (the links' targets)
    assert editable["gpu_cluster.infra.cli"] == "infra/cli.py"
