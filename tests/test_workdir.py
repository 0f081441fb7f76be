"""`gpuc run --workdir DIR`: packing (infra/workdir.py) and the upload (infra/aws/workdir.py)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import shutil
import socket
import subprocess
import tarfile
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from gpu_cluster.components.jobs import workdir_key
from gpu_cluster.infra import workdir
from gpu_cluster.infra.aws.workdir import upload_workdir
from gpu_cluster.infra.errors import AwsError
from gpu_cluster.infra.workdir import (
    IGNORE_FILE,
    PackedWorkdir,
    WorkdirError,
    missing_script_hint,
    pack_workdir,
)

BUCKET = "gpuc-data-123456789012-us-east-1"
REGION = "us-east-1"


def tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def members(packed: PackedWorkdir) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(packed.archive), mode="r:gz") as tar:
        return {info.name: info for info in tar.getmembers()}


def refused(folder: Path, code: int = 3) -> str:
    with pytest.raises(WorkdirError) as caught:
        pack_workdir(folder)
    assert caught.value.code == code, str(caught.value)
    return str(caught.value)


def gpucignore_lines(message: str) -> list[str]:
    """The lines a refusal tells the user to add to .gpucignore."""
    block = message.split(f"{IGNORE_FILE}:", 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if not line.startswith("    /"):
            break
        lines.append(line.strip())
    return lines


# --- what is packed ---------------------------------------------------------------------------


def test_gitignore_root_and_nested_with_negation_anchors_and_folders(tmp_path):
    tree(
        tmp_path,
        {
            ".gitignore": "*.log\n!keep.log\ndata/\n!data/keep.txt\n/only-root.txt\ncache\n",
            "train.py": "print(1)\n",
            "a.log": "x",
            "keep.log": "k",
            "data/big.bin": "d",
            "data/keep.txt": "k",  # under an excluded folder: git cannot re-include it
            "only-root.txt": "r",
            "src/only-root.txt": "anchored patterns match at their own folder only",
            "src/logs/x.log": "l",
            "src/cache/c": "c",
            "sub/.gitignore": "!*.log\n/local/\n",
            "sub/b.log": "re-included by the deeper file",
            "sub/local/x": "excluded by sub's anchored folder pattern",
            "local/x": "sub's anchored pattern does not reach here",
        },
    )
    packed = pack_workdir(tmp_path)
    assert packed.files == (
        ".gitignore",
        "keep.log",
        "local/x",
        "src/only-root.txt",
        "sub/.gitignore",
        "sub/b.log",
        "train.py",
    )


def test_gpucignore_applies_on_top_of_gitignore(tmp_path):
    tree(
        tmp_path,
        {
            ".gitignore": "config.yaml\nvendor/\n",
            IGNORE_FILE: "!config.yaml\nnotebooks/\n*.ckpt\n",
            "train.py": "",
            "config.yaml": "needed by the job, ignored by git",
            "vendor/lib.py": "",
            "notebooks/explore.ipynb": "{}",
            "sub/model.ckpt": "w",
        },
    )
    assert pack_workdir(tmp_path).files == (".gitignore", IGNORE_FILE, "config.yaml", "train.py")


def test_git_virtualenvs_and_junk_are_never_packed(tmp_path):
    tree(
        tmp_path,
        {
            "train.py": "",
            ".git/HEAD": "ref: refs/heads/main\n",
            "sub/.git": "gitdir: ../.git/modules/sub\n",  # a submodule's .git file
            "sub/mod.py": "",
            ".venv/pyvenv.cfg": "home = /usr/bin\n",
            ".venv/lib/site.py": "",
            "env2/pyvenv.cfg": "home = /usr/bin\n",  # a virtualenv under any name
            "env2/bin/python": "",
            "venv/notes.txt": "no pyvenv.cfg: a plain folder named venv, packed",
            "__pycache__/train.cpython-311.pyc": "",
            "pkg/__pycache__/x.pyc": "",
            "pkg/stray.pyc": "",
            "nb/.ipynb_checkpoints/a-checkpoint.ipynb": "",
            "nb/a.ipynb": "{}",
        },
    )
    files = pack_workdir(tmp_path).files
    assert files == ("nb/a.ipynb", "sub/mod.py", "train.py", "venv/notes.txt")


def test_a_default_can_be_re_included(tmp_path):
    tree(tmp_path, {"train.py": "", "legacy.pyc": "", IGNORE_FILE: "!legacy.pyc\n"})
    assert "legacy.pyc" in pack_workdir(tmp_path).files


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_same_files_as_git_would_commit(tmp_path):
    """Held against git itself: `git ls-files --others --exclude-standard` on the same tree."""
    tree(
        tmp_path,
        {
            ".gitignore": "*\n!*/\n!*.py\n!.gitignore\nbuild*/\n!build-keep/\n**/tmp/**\n",
            "a.py": "",
            "a.txt": "",
            "pkg/b.py": "",
            "pkg/b.txt": "",
            "pkg/.gitignore": "!*.txt\nsecret.txt\n/deep/*\n!/deep/ok.py\n",
            "pkg/c.txt": "",
            "pkg/secret.txt": "",
            "pkg/deep/no.py": "",
            "pkg/deep/ok.py": "",
            "pkg/deep/sub/x.py": "",
            "build-out/x.py": "",
            "build-keep/y.py": "",
            "x/tmp/t.py": "",
            "x/tmp/y/t.py": "",
            "x/logs/z.py": "",
            "sp ace/q.py": "",
            "other/.gitignore": "!*.txt\n*.log\n!logs/\ncache\n!src/\ndata/\n!data/keep.txt\n",
            "other/k.txt": "",
            "other/logs/x.log": "",
            "other/logs/y.txt": "",
            "other/src/z.txt": "",
            "other/src/cache/c.txt": "",
            "other/data/keep.txt": "",
        },
    )
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    listed = subprocess.run(
        ["git", "-C", str(tmp_path), "ls-files", "--others", "--exclude-standard", "-z"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    ).stdout
    expected = tuple(sorted(name for name in listed.split("\0") if name))
    assert {"pkg/c.txt", "pkg/deep/ok.py", "other/logs/y.txt"} <= set(expected)
    assert not {"other/logs/x.log", "other/src/cache/c.txt", "other/data/keep.txt"} & set(expected)
    assert pack_workdir(tmp_path).files == expected


# --- deterministic ----------------------------------------------------------------------------


def test_same_files_same_digest_whatever_the_order_mtimes_and_modes(tmp_path):
    files: dict[str, str | bytes] = {
        "train.py": "print(1)\n",
        "pkg/a.py": "A = 1\n",
        "pkg/b/c.txt": "c",
    }
    first = tree(tmp_path / "one", files)
    second = tmp_path / "two"
    for name in reversed(list(files)):  # created in another order
        tree(second, {name: files[name]})
    os.utime(second / "train.py", (1_000_000, 1_000_000))
    (second / "pkg" / "a.py").chmod(0o600)  # not executable: stored 0644 either way
    one, two = pack_workdir(first), pack_workdir(second)
    assert one.archive == two.archive and one.sha256 == two.sha256
    assert one.sha256 == hashlib.sha256(one.archive).hexdigest() and one.size == len(one.archive)
    assert one.source_bytes == sum(len(content) for content in files.values())
    for info in members(one).values():
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (0, 0, 0, "", "")
    assert one.archive[:10] == b"\x1f\x8b\x08\0\0\0\0\0\0\xff"  # no name, mtime 0
    assert gzip.decompress(one.archive)  # a valid gzip stream (CRC and length checked)

    (second / "pkg" / "b" / "c.txt").write_text("d")  # one byte changed
    assert pack_workdir(second).sha256 != one.sha256


def test_executable_bit_kept(tmp_path):
    tree(tmp_path, {"run.sh": "#!/bin/bash\n", "lib.sh": "f() { :; }\n"})
    before = pack_workdir(tmp_path)
    (tmp_path / "run.sh").chmod(0o755)
    after = pack_workdir(tmp_path)
    assert after.sha256 != before.sha256
    modes = {name: info.mode for name, info in members(after).items()}
    assert modes == {"lib.sh": 0o644, "run.sh": 0o755}


def test_the_archive_extracts_to_exactly_the_files(tmp_path):
    source = tree(
        tmp_path / "src",
        {"train.py": "print('hi')\n", "pkg/mod.py": "X = 2\n", "data/tiny.csv": b"\x00\x01\xff"},
    )
    (source / "pkg" / "run.sh").write_text("#!/bin/sh\n")
    (source / "pkg" / "run.sh").chmod(0o755)
    (source / "empty").mkdir()  # empty folders are not stored
    (source / "latest.py").symlink_to("pkg/mod.py")
    packed = pack_workdir(source)
    out = tmp_path / "out"
    with tarfile.open(fileobj=io.BytesIO(packed.archive), mode="r:gz") as tar:
        tar.extractall(out, filter="data")  # what a careful node does: refuses unsafe members
    extracted = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir())
    assert tuple(extracted) == packed.files
    for name in packed.files:
        assert (out / name).read_bytes() == (source / name).read_bytes()
    assert (out / "latest.py").is_symlink() and os.readlink(out / "latest.py") == "pkg/mod.py"
    assert os.access(out / "pkg" / "run.sh", os.X_OK)
    assert not (out / "empty").exists()


# --- symlinks and special files ---------------------------------------------------------------


def test_symlink_inside_is_kept_as_a_symlink(tmp_path):
    tree(tmp_path, {"configs/base.yaml": "lr: 1\n", "train.py": ""})
    (tmp_path / "config.yaml").symlink_to("configs/base.yaml")
    (tmp_path / "cfg").symlink_to("configs")  # a folder
    info = members(pack_workdir(tmp_path))
    assert info["config.yaml"].issym() and info["config.yaml"].linkname == "configs/base.yaml"
    assert info["cfg"].issym() and info["cfg"].linkname == "configs"
    assert "configs/base.yaml" in info


def test_symlinks_that_would_not_resolve_on_the_node_are_refused(tmp_path):
    outside = tree(tmp_path / "elsewhere", {"weights.bin": "w"})
    folder = tree(tmp_path / "job", {"train.py": "", ".gitignore": "ignored.txt\n"})
    tree(folder, {"ignored.txt": "i"})
    (folder / "weights.bin").symlink_to(outside / "weights.bin")  # absolute
    (folder / "up.bin").symlink_to("../elsewhere/weights.bin")  # relative, leaves DIR
    (folder / "gone").symlink_to("missing.txt")
    (folder / "hidden").symlink_to("ignored.txt")
    (folder / "loop").symlink_to("loop")
    message = refused(folder)
    for name in ("weights.bin", "up.bin", "gone", "hidden", "loop"):
        assert f"  - {name} ->" in message
    assert "absolute" in message and "outside the folder" in message
    assert "does not exist" in message and "not packed" in message and "loop" in message
    assert "copy the file into the folder" in message

    (folder / IGNORE_FILE).write_text("\n".join(gpucignore_lines(message)) + "\n")
    assert pack_workdir(folder).files == (".gitignore", IGNORE_FILE, "train.py")


def test_special_files_are_skipped(tmp_path):
    tree(tmp_path, {"train.py": ""})
    os.mkfifo(tmp_path / "pipe")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s.sock"))
        assert pack_workdir(tmp_path).files == ("train.py",)


# --- refused: credentials ---------------------------------------------------------------------


@pytest.fixture
def s3():
    """The stack's bucket in moto: default SSE-KMS with its own key, versioned."""
    with mock_aws():
        key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_encryption(
            Bucket=BUCKET,
            ServerSideEncryptionConfiguration={
                "Rules": [
                    {
                        "ApplyServerSideEncryptionByDefault": {
                            "SSEAlgorithm": "aws:kms",
                            "KMSMasterKeyID": key,
                        },
                        "BucketKeyEnabled": True,
                    }
                ]
            },
        )
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        # no bucket policy: moto's in-process S3 denies every request under the stack's
        # tls_only_bucket_policy (it models neither aws:SecureTransport nor s3:TlsVersion);
        # the upload's https URL is asserted instead
        setattr(client, "bucket_key", key)  # noqa: B010 - a boto3 client has no such attribute
        yield client


def versions(s3) -> list[dict]:
    return s3.list_object_versions(Bucket=BUCKET).get("Versions", [])


def ship(folder: Path, s3) -> bool:
    """What `gpuc run --workdir` does: pack, then upload."""
    return upload_workdir(s3, BUCKET, pack_workdir(folder))


CREDENTIALS = [
    ".aws/credentials",
    "home/.aws/config",
    ".ssh/config",
    "keys/server.pem",
    "tls.key",
    "client.p12",
    "client.pfx",
    "id_rsa",
    "backup/id_rsa.old",
    "id_ed25519",
    "id_ecdsa",
    "id_dsa",
    ".env",
    ".env.production",
    "app/.env.local",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    "credentials.json",
    "gcp/CREDENTIALS.JSON",
    ".docker/config.json",
    "odd [dir]/#a *?!\\.pem",  # the .gpucignore line given escapes glob characters
    "!b.key",  # and a leading '!'
]


@pytest.mark.parametrize("name", CREDENTIALS)
def test_credentials_are_refused_and_nothing_is_uploaded(tmp_path, s3, name):
    folder = tree(tmp_path, {"train.py": "", name: "secret"})
    with pytest.raises(WorkdirError) as caught:
        ship(folder, s3)
    message = str(caught.value)
    assert caught.value.code == 3 and "look like credentials" in message
    folder_part = next((p for p in (".aws", ".ssh") if f"{p}/" in name), None)
    listed = name.split(f"{folder_part}/")[0] + f"{folder_part}/" if folder_part else name
    assert f"  - {listed} (" in message
    assert versions(s3) == []
    (folder / IGNORE_FILE).write_text("\n".join(gpucignore_lines(message)) + "\n")
    assert name not in pack_workdir(folder).files  # the lines given are the fix


@pytest.mark.parametrize("name", ["trailing space ", "#hash", "!bang", "a[b]c", "x*y?z", "b\\s"])
def test_the_lines_given_exclude_exactly_that_path(tmp_path, name):
    tree(tmp_path, {"train.py": "", name: "", "a b c": "", "x-y-z": ""})
    (tmp_path / IGNORE_FILE).write_text(workdir._escape(name) + "\n")
    assert pack_workdir(tmp_path).files == (IGNORE_FILE, "a b c", "train.py", "x-y-z")


def test_every_credential_is_listed_at_once(tmp_path):
    tree(tmp_path, {"train.py": "", **{f"k{i}.pem": "" for i in range(25)}, ".env": ""})
    message = refused(tmp_path)
    assert "26 path(s) look like credentials" in message and "and 6 more" in message


@pytest.mark.parametrize(
    "name", [".env.example", ".env.sample", ".env.template", "id_rsa.pub", "id_ed25519.pub"]
)
def test_templates_and_public_keys_are_not_credentials(tmp_path, name):
    tree(tmp_path, {"train.py": "", name: "KEY=changeme"})
    assert name in pack_workdir(tmp_path).files


def test_ignored_credentials_are_not_refused(tmp_path):
    tree(
        tmp_path,
        {
            "train.py": "",
            ".gitignore": ".env\n*.pem\n",
            ".env": "S=1",
            "k.pem": "",
            IGNORE_FILE: ".aws/\n",
            ".aws/credentials": "",
        },
    )
    assert pack_workdir(tmp_path).files == (".gitignore", IGNORE_FILE, "train.py")


# --- refused: size ----------------------------------------------------------------------------


def sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)  # no blocks written: a 50 GB file costs nothing here


def test_too_large_is_refused_from_the_walk_with_the_biggest_first(tmp_path, s3, monkeypatch):
    tree(tmp_path, {"train.py": "print(1)\n"})
    sparse(tmp_path / "data" / "shard-0.bin", 50 * 1024**3)
    sparse(tmp_path / "model.ckpt", 300 * 1024**2)
    read = []
    original = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or original(self))
    with pytest.raises(WorkdirError) as caught:
        ship(tmp_path, s3)
    message = str(caught.value)
    assert caught.value.code == 3 and read == []  # refused before a file was read
    assert "50.3 GiB in 3 files" in message and "100.0 MiB" in message
    largest = message.split("largest files:")[1]
    assert largest.index("data/shard-0.bin 50.0 GiB") < largest.index("model.ckpt 300.0 MiB")
    assert "s3://<bucket>/datasets/" in message and "/mnt/data" in message
    assert versions(s3) == []
    assert gpucignore_lines(message) == ["/data/shard-0.bin", "/model.ckpt"]


def test_too_many_files_is_refused_with_the_folder_named(tmp_path, monkeypatch):
    monkeypatch.setattr(workdir, "MAX_FILES", 50)
    tree(tmp_path, {"train.py": "", **{f"images/{i:03}.png": "p" for i in range(80)}})
    message = refused(tmp_path)
    assert "81 files" in message and "images/ 80 B in 80 files" in message
    assert gpucignore_lines(message) == ["/images/"]
    (tmp_path / IGNORE_FILE).write_text("/images/\n")
    assert pack_workdir(tmp_path).files == (IGNORE_FILE, "train.py")


def test_a_huge_tree_stops_the_walk(tmp_path, monkeypatch):
    monkeypatch.setattr(workdir, "MAX_FILES", 5)
    monkeypatch.setattr(workdir, "WALK_LIMIT", 20)
    tree(tmp_path, {f"d{i}/f{j}": "" for i in range(10) for j in range(10)})
    assert "at least 20 files" in refused(tmp_path)


# --- refused: usage ---------------------------------------------------------------------------


def test_missing_folder(tmp_path):
    message = refused(tmp_path / "nope", code=2)
    assert str(tmp_path / "nope") in message and "no such folder" in message


def test_not_a_folder(tmp_path):
    tree(tmp_path, {"train.py": ""})
    message = refused(tmp_path / "train.py", code=2)
    assert "not a folder" in message and f"--workdir {tmp_path}" in message


@pytest.mark.parametrize(
    "files", [{}, {".gitignore": "*\n"}, {"__pycache__/a.pyc": "", ".git/HEAD": ""}]
)
def test_empty_after_ignores(tmp_path, files):
    tree(tmp_path, files)
    if not files:
        (tmp_path / "empty-sub").mkdir()
    message = refused(tmp_path)
    assert "nothing to pack" in message and IGNORE_FILE in message


# --- the upload -------------------------------------------------------------------------------


def sent(s3, operation: str) -> list:
    requests = []
    s3.meta.events.register(
        f"before-send.s3.{operation}", lambda request, **_: requests.append(request)
    )
    return requests


def test_an_unchanged_folder_is_uploaded_once(tmp_path, s3):
    folder = tree(tmp_path, {"train.py": "print(1)\n"})
    puts = sent(s3, "PutObject")
    packed = pack_workdir(folder)
    assert upload_workdir(s3, BUCKET, packed) is True
    assert upload_workdir(s3, BUCKET, pack_workdir(folder)) is False
    assert len(puts) == 1
    stored = versions(s3)
    assert [v["Key"] for v in stored] == [workdir_key(packed.sha256)]
    assert workdir_key(packed.sha256) == f"code/{packed.sha256}.tar.gz"

    request = puts[0]
    raw = hashlib.sha256(packed.archive).digest()
    assert request.headers["x-amz-checksum-sha256"] in (
        base64.b64encode(raw),
        base64.b64encode(raw).decode(),
    )
    assert request.url.startswith("https://")
    assert not any(h.lower().startswith("x-amz-server-side-encryption") for h in request.headers)
    head = s3.head_object(Bucket=BUCKET, Key=workdir_key(packed.sha256))
    assert head["ContentType"] == "application/gzip"
    assert head["Metadata"] == {"gpuc-sha256": packed.sha256}
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"] == s3.bucket_key  # the bucket's key, not aws/s3
    body = s3.get_object(Bucket=BUCKET, Key=workdir_key(packed.sha256))["Body"].read()
    assert body == packed.archive

    (folder / "train.py").write_text("print(2)\n")
    assert ship(folder, s3) is True
    assert len(puts) == 2 and len({v["Key"] for v in versions(s3)}) == 2


def test_a_wrong_object_at_the_key_is_replaced(tmp_path, s3):
    packed = pack_workdir(tree(tmp_path, {"train.py": ""}))
    s3.put_object(Bucket=BUCKET, Key=workdir_key(packed.sha256), Body=b"truncated")
    assert upload_workdir(s3, BUCKET, packed) is True
    body = s3.get_object(Bucket=BUCKET, Key=workdir_key(packed.sha256))["Body"].read()
    assert body == packed.archive


def test_head_forbidden_names_the_permissions(tmp_path):
    packed = pack_workdir(tree(tmp_path, {"train.py": ""}))
    client = boto3.client("s3", region_name=REGION)
    with Stubber(client) as stub:
        stub.add_client_error("head_object", "403", "Forbidden", 403)
        with pytest.raises(AwsError) as caught:
            upload_workdir(client, BUCKET, packed)
        stub.assert_no_pending_responses()
    message = str(caught.value)
    assert "s3:GetObject" in message and "s3:ListBucket" in message
    assert f"arn:aws:s3:::{BUCKET}/code/*" in message and "nothing was uploaded" in message


def test_put_denied_names_the_permissions_and_the_key(tmp_path):
    packed = pack_workdir(tree(tmp_path, {"train.py": ""}))
    client = boto3.client("s3", region_name=REGION)
    with Stubber(client) as stub:
        stub.add_client_error("head_object", "404", "Not Found", 404)
        stub.add_client_error("put_object", "AccessDenied", "Access Denied", 403)
        with pytest.raises(AwsError) as caught:
            upload_workdir(client, BUCKET, packed)
    message = str(caught.value)
    assert "s3:PutObject" in message and "kms:GenerateDataKey" in message


# --- the command's script ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "script"),
    [
        (["python", "train.py"], "train.py"),
        (["python", "-u", "scripts/x.py", "--lr", "0.1"], "scripts/x.py"),
        (["./run.sh"], "./run.sh"),
        (["bash", "run.sh"], "run.sh"),
        (["./bin/train"], "./bin/train"),
        (["torchrun", "--nproc_per_node=8", "train.py", "--cfg", "c.py"], "train.py"),
        (["env", "A=1.py", "python", "t.py"], "t.py"),
        (["python train.py --x 1"], "train.py"),
        (["python", "-m", "pkg.train", "x.py"], None),
        (["python", "-c", "import x; print('a.py')"], None),
        (["python", "/opt/app/train.py"], None),
        (["nvidia-smi"], None),
    ],
)
def test_script_of(command, script):
    assert workdir.script_of(command) == script


def test_hint_without_workdir(tmp_path):
    tree(tmp_path, {"train.py": ""})
    here = missing_script_hint(["python", "train.py"], None, tmp_path)
    assert here.startswith("train.py: it exists here but is not on the nodes")
    assert "--workdir ." in here and "/home/ubuntu" in here
    elsewhere = missing_script_hint(["python", "other.py"], None, tmp_path)
    assert "other.py: it is not on the nodes" in elsewhere and "--workdir" in elsewhere
    assert missing_script_hint(["python", "-m", "pkg"], None, tmp_path) == ""


def test_hint_with_workdir(tmp_path):
    tree(tmp_path, {"train.py": "", "scripts/x.py": "", ".gitignore": "scripts/secret.py\n"})
    tree(tmp_path, {"scripts/secret.py": ""})
    packed = pack_workdir(tmp_path)
    assert missing_script_hint(["python", "./train.py"], packed) == ""
    assert missing_script_hint(["python", "scripts/x.py"], packed) == ""
    ignored = missing_script_hint(["python", "scripts/secret.py"], packed)
    assert "scripts/secret.py: it is not in the workdir" in ignored and ".gitignore" in ignored
    outside = missing_script_hint(["python", "../up.py"], packed)
    assert "outside the workdir" in outside
