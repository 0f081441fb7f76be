#!/bin/bash
# gpu-cluster: a job's code, dependencies and container on this node; sourced by
# gpu-cluster-jobs (the boot bundle), which runs as the job user in the job's unit. Every node,
# a replacement too, does this before it joins the job's rendezvous, from the job's spec:
#   workdir  {key, sha256}: the archive `gpuc run --workdir` put in the stack's bucket, fetched,
#            refused unless its SHA-256 is the spec's, unpacked to ~/gpuc-jobs/NAME (kept while
#            the digest stays): the job's working directory
#   setup    a shell command run once per job version (code digest, setup, image) on each node:
#            without an image in a virtualenv of the job's own that sees the Deep Learning AMI's
#            PyTorch (its site-packages after the job's own, through a .pth file), with an image
#            in a container of it, committed as the image the job then runs in
#   image    pulled (ECR: a login with the node role first), run with what EFA and NCCL need
# A failure is the job's failure on this node, reported with its exit code and last lines.
# Each function sets JOB_ERROR (why it failed) and its result (JOB_DIR, JOB_IMAGE) in this shell.
# shellcheck disable=SC2034  # JOB_ERROR, JOB_DIR, JOB_IMAGE and LAUNCH are read by gpu-cluster-jobs

JOB_HOME="$R${HOME:-/home/$JOB_USER}/gpuc-jobs"
JOB_ERROR="" JOB_DIR="" JOB_IMAGE=""

spec_get() {  # spec_get FILE PATH: a field of the spec (PATH: a.b for nested; "" when absent)
  python3 - "$1" "$2" <<'PY'
import json, sys
value = json.load(open(sys.argv[1]))
for part in sys.argv[2].split("."):
    value = value.get(part) if isinstance(value, dict) else None
print("" if value is None else value)
PY
}

last_lines() {  # last_lines FILE: its last 5 lines, at most 1500 characters
  tail -n 5 "$1" 2>/dev/null | cut -c1-300
}

prefixed() {  # prefixed TEXT: each line of stdin after TEXT, flushed line by line
  while IFS= read -r line || [ -n "$line" ]; do printf '%s%s\n' "$1" "$line"; done
}

job_code() {  # job_code NAME SPEC: the job's code unpacked in JOB_DIR ("": it has none)
  local name=$1 spec=$2 key sha dir got archive err
  key=$(spec_get "$spec" workdir.key) && sha=$(spec_get "$spec" workdir.sha256) \
    || { JOB_ERROR="cannot read the job's spec"; return 1; }
  [ -n "$key" ] || return 0
  dir="$JOB_HOME/$name"
  if [ -d "$dir" ] && [ "$(cat "$dir.sha256" 2>/dev/null)" = "$sha" ]; then
    JOB_DIR=$dir
    return 0
  fi
  mkdir -p "$JOB_HOME" || { JOB_ERROR="cannot create $JOB_HOME"; return 1; }
  archive="$JOB_HOME/.$name.tar.gz" err="$JOB_HOME/.$name.fetch"
  if ! aws s3 cp --region "$REGION" --only-show-errors "s3://$DATA_BUCKET/$key" "$archive" \
    2> "$err"; then
    JOB_ERROR="cannot fetch the job's code s3://$DATA_BUCKET/$key: $(last_lines "$err")"
    return 1
  fi
  got=$(sha256sum < "$archive" | cut -c1-64)
  if [ "$got" != "$sha" ]; then
    rm -f "$archive"
    JOB_ERROR="the job's code s3://$DATA_BUCKET/$key has SHA-256 $got, not the job's $sha:"
    JOB_ERROR+=" refused (changed since gpuc run uploaded it; gpuc run uploads it again)"
    return 1
  fi
  # GNU tar keeps members inside the folder (it drops a leading / and skips ..)
  rm -rf "$dir.new" && mkdir -p "$dir.new" \
    && tar -xzf "$archive" -C "$dir.new" --no-same-owner 2> "$err" \
    || { JOB_ERROR="cannot unpack the job's code: $(last_lines "$err")"; return 1; }
  rm -rf "$dir" && mv "$dir.new" "$dir" && echo "$sha" > "$dir.sha256" \
    && rm -f "$archive" "$err" || { JOB_ERROR="cannot install the job's code in $dir"; return 1; }
  JOB_DIR=$dir
}

# job_version SPEC [IMAGE-ID]: what a setup depends on, as one digest (the image as pulled: a tag
# such as :latest may move)
job_version() {
  printf '%s\n%s\n%s\n%s\n' "$(spec_get "$1" workdir.sha256)" "$(spec_get "$1" setup)" \
    "$(spec_get "$1" image)" "${2:-}" | sha256sum | cut -c1-64
}

run_setup() {  # run_setup NAME LOG COMMAND...: COMMAND's output to the job's log; its status
  local name=$1 log=$2 out="$JOB_HOME/.$1.setup" rc
  shift 2
  echo "[$name] gpu-cluster: setup: $(spec_get "$SPEC" setup | head -1)" >> "$log"
  # a pipeline: its last line is written before the status is read (streamed to the log)
  "$@" 2>&1 | tee "$out" | prefixed "[$name] setup: " >> "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    JOB_ERROR="setup failed (exit $rc): $(last_lines "$out")"
    echo "[$name] gpu-cluster: setup failed (exit $rc)" >> "$log"
  fi
  return "$rc"
}

job_venv() {  # job_venv NAME SPEC DIR LOG: the job's virtualenv set up (and active) when it has a setup
  local name=$1 venv="$JOB_HOME/.venvs/$1" version base site setup
  setup=$(spec_get "$2" setup)
  [ -n "$setup" ] || return 0
  version=$(job_version "$2")
  if [ "$(cat "$venv/.gpuc-setup" 2>/dev/null)" != "$version" ]; then
    base=python3
    [ -x "$R/opt/pytorch/bin/python3" ] && base="$R/opt/pytorch/bin/python3"
    rm -rf "$venv"
    # a Python without ensurepip (Debian's, without python3-venv) makes one without pip: pip
    # then comes from the AMI's environment (the .pth below) and installs into this one
    if ! "$base" -m venv "$venv" 2>/dev/null; then
      rm -rf "$venv"
      "$base" -m venv --without-pip "$venv" \
        || { JOB_ERROR="cannot create the job's virtualenv $venv with $base"; return 1; }
      printf '#!/bin/sh\nexec "%s/bin/python" -m pip "$@"\n' "$venv" > "$venv/bin/pip" \
        && chmod 755 "$venv/bin/pip" && cp "$venv/bin/pip" "$venv/bin/pip3"
    fi
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
      && "$base" -c 'import site; print("\n".join(site.getsitepackages()))' \
        > "$site/gpuc-base-environment.pth" \
      || { JOB_ERROR="cannot link $base's packages into $venv"; return 1; }
    # in the job's code (the job's unit is already there), this shell's JOB_ERROR kept
    SPEC="$2" VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" run_setup "$name" "$4" \
      bash -c "cd \"\$0\" && eval \"\$1\"" "$3" "$setup" || return 1
    echo "$version" > "$venv/.gpuc-setup"
  fi
  export VIRTUAL_ENV="$venv" GPUC_JOB_VENV="$venv" PATH="$venv/bin:$PATH"
}

# ecr_login IMAGE: docker login to the image's ECR registry (none for others): ACCOUNT.dkr.ecr
# .REGION.amazonaws.com[.cn], its FIPS (dkr.ecr-fips) and dual-stack (dkr-ecr.REGION.on.aws) forms
ecr_login() {
  local registry=${1%%/*} region
  case $registry in
    *.dkr.ecr.*.amazonaws.com | *.dkr.ecr.*.amazonaws.com.cn) region=${registry#*.dkr.ecr.} ;;
    *.dkr.ecr-fips.*.amazonaws.com) region=${registry#*.dkr.ecr-fips.} ;;
    *.dkr-ecr.*.on.aws) region=${registry#*.dkr-ecr.} ;;
    *) return 0 ;;
  esac
  region=${region%%.*}
  aws ecr get-login-password --region "$region" \
    | docker login --username AWS --password-stdin "$registry"
}

job_image() {  # job_image NAME SPEC LOG: the job's image pulled (3 tries) into JOB_IMAGE
  local name=$1 image attempt out="$JOB_HOME/.$1.pull" rc=0
  image=$(spec_get "$2" image)
  [ -n "$image" ] || return 0
  mkdir -p "$JOB_HOME"
  for attempt in 1 2 3; do
    { ecr_login "$image" && docker pull --quiet "$image"; } > "$out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
      JOB_IMAGE=$image
      return 0
    fi
    prefixed "[$name] image: " < "$out" >> "$3"
    [ "$attempt" -lt 3 ] && pause "$attempt"
  done
  JOB_ERROR="image pull failed (exit $rc): $(last_lines "$out")"
  return 1
}

# container_args NAME DIR: docker run's options for a training container: the GPUs, every EFA
# device, the host's network and IPC (NCCL's shared memory and EFA need both), memlock
# unlimited (libfabric pins memory), the node's disks and the cluster's files; with "job", as
# the job user (else as the image's own user).
container_args() {
  local device mount
  printf '%s\n' --init --gpus all --network host --ipc host --ulimit memlock=-1:-1 \
    --ulimit stack=67108864
  # (getpass.getuser(), which torch's compile cache asks, needs USER where the image has no
  # passwd entry for the job user)
  [ "${3:-}" = job ] && printf '%s\n' --user "$(id -u):$(id -g)" -e HOME=/tmp \
    -e "USER=$(id -un)" -e "LOGNAME=$(id -un)"
  for device in "$R"/dev/infiniband/uverbs*; do
    [ -e "$device" ] && printf '%s\n' --device "${device#"$R"}"
  done
  for mount in "$SCRATCH" "$DATA_MOUNT" "$LUSTRE_MOUNT"; do
    [ -n "$mount" ] && [ -d "$R$mount" ] && printf '%s\n' -v "$R$mount:$mount"
  done
  printf '%s\n' -v "$R/etc/gpu-cluster:/etc/gpu-cluster:ro" -v "$R/run/gpu-cluster:/run/gpu-cluster:ro" \
    -v "$R/usr/local/bin/gpuc-torchrun:/usr/local/bin/gpuc-torchrun:ro"
  [ -n "$2" ] && printf '%s\n' -v "$2:$2" -w "$2"
}

# container_setup NAME SPEC DIR LOG: the job's setup run in JOB_IMAGE once per job version,
# kept as a local image that becomes JOB_IMAGE
container_setup() {
  local name=$1 setup tag pulled
  pulled=$(docker image inspect --format '{{.Id}}' "$JOB_IMAGE" 2>/dev/null)
  tag="gpuc-job/$1:$(job_version "$2" "$pulled" | cut -c1-16)"
  setup=$(spec_get "$2" setup)
  [ -n "$setup" ] || return 0
  if docker image inspect "$tag" > /dev/null 2>&1; then JOB_IMAGE=$tag; return 0; fi
  local -a args
  mapfile -t args < <(container_args "$name" "$3")
  docker rm -f "gpuc-setup-$name" > /dev/null 2>&1
  # setup as the image's own user (installs go into the image), then kept as a local image; what
  # it left in the job's code goes back to the job user (it replaces the folder on a new digest)
  SPEC="$2" run_setup "$name" "$4" docker run --name "gpuc-setup-$name" "${args[@]}" \
    "$JOB_IMAGE" bash -c 'eval "$1"; rc=$?; chown -R "$2" "$3" 2>/dev/null; exit $rc' setup \
    "$setup" "$(id -u):$(id -g)" "$3" || return 1
  docker commit "gpuc-setup-$name" "$tag" > /dev/null && docker rm "gpuc-setup-$name" > /dev/null \
    || { JOB_ERROR="cannot keep the set-up container as $tag"; return 1; }
  JOB_IMAGE=$tag
}

# container_launcher NAME DIR ENV...: LAUNCH, the command that runs gpuc-torchrun in JOB_IMAGE,
# the named variables passed in (docker takes their values from its own environment)
container_launcher() {
  local name=$1 dir=$2 variable
  local -a options
  shift 2
  mapfile -t options < <(container_args "$name" "$dir" job)
  LAUNCH=(docker run --rm --name "gpuc-job-$name" "${options[@]}")
  for variable in "$@"; do LAUNCH+=(-e "$variable"); done
  LAUNCH+=("$JOB_IMAGE" /usr/local/bin/gpuc-torchrun)
}
