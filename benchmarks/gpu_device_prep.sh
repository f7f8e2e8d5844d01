#!/usr/bin/env bash
# Prepare what benchmarks/gpu_device_check.sh carries to a GPU machine that cannot reach the network
# (issue 21). Run here, at the repository root; everything lands in .device/ (git-ignored):
#
#   .device/wheels/cp312/   the package's dependencies as CPython 3.12 manylinux wheels, except those
#                           the lent machine's python3 already holds (PyTorch's numpy, nvidia-ml-py)
#   .device/src/gpu-burn/   wilicc/gpu-burn and NVIDIA/nccl-tests sources, exported from the mirrors
#   .device/src/nccl-tests/ the `fetch` tool made (MIRRORS, default /work/.mirror), to build with nvcc
#
# Then: run(command="benchmarks/gpu_device_check.sh", carry=[".device"]).
set -eu
PIP=${PIP:-pip}; MIRRORS=${MIRRORS:-/work/.mirror}; DEST=${DEST:-.device}
mkdir -p "$DEST/wheels/cp312" "$DEST/src"
# the package's own dependencies (pyproject.toml), nvidia-ml-py included: the check installs a
# wheel only when the machine lacks that distribution, so a newer one there is kept
deps=$(python3 - <<'PY'
import tomllib
print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))
PY
)
# shellcheck disable=SC2086
"$PIP" download --quiet --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$DEST/wheels/cp312" $deps
for repo in wilicc+gpu-burn:gpu-burn NVIDIA+nccl-tests:nccl-tests; do
  git_dir="$MIRRORS/${repo%%:*}/repo"; out="$DEST/src/${repo#*:}"
  if [ -d "$git_dir" ]; then rm -rf "$out"; mkdir -p "$out"; git --git-dir="$git_dir" archive HEAD | tar -x -C "$out"
  else echo "no mirror at $git_dir: ${repo#*:} will not be built" >&2; fi
done
ls "$DEST/wheels/cp312"; du -sh "$DEST"
