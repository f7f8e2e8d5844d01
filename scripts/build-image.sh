#!/usr/bin/env bash
# Build the harness image (deploy/image/Containerfile) with buildah, from an offline wheelhouse.
#   scripts/build-image.sh [--base-from-debian] [TAG]       (as root; TAG: gpu-acceptance-harness:<version>)
# The wheelhouse (the harness and its dependencies) is built into a temporary build context, so the
# image build itself fetches no Python package. --base-from-debian needs no container registry: the
# base is a Debian 12 rootfs that mmdebstrap makes from Debian's archive with every tool the checks
# run, imported as localhost/gpu-acceptance-harness-base:<digest of its package list>; the rootfs
# tarball is kept in $HARNESS_IMAGE_CACHE (default ~/.cache/gpu-acceptance-harness) and the base
# image in buildah's storage, so the next build skips both (~3 minutes the first time, ~1 after).
# Every step is bounded (timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
from_debian=0
[ "${1:-}" = "--base-from-debian" ] && { from_debian=1; shift; }
py=${PYTHON:-.venv/bin/python}
[ -x "$py" ] || py=python3
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -1)
tag=${1:-localhost/gpu-acceptance-harness:$version}
command -v buildah >/dev/null || { echo "build-image: buildah missing (apt-get install buildah)" >&2; exit 1; }

packages="python3,python3-venv,fio,stress-ng,nvme-cli,ethtool,iperf3,pciutils,ipmitool,perftest,rdma-core"
packages+=",util-linux,procps,kmod"
args=()
if [ $from_debian = 1 ]; then
  command -v mmdebstrap >/dev/null || { echo "build-image: mmdebstrap missing (apt-get install mmdebstrap)" >&2; exit 1; }
  key=$(printf 'bookworm %s' "$packages" | sha256sum | cut -c1-12)
  base=localhost/gpu-acceptance-harness-base:$key
  if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
    cache=${HARNESS_IMAGE_CACHE:-$HOME/.cache/gpu-acceptance-harness}
    mkdir -p "$cache"
    rootfs=$cache/rootfs-$key.tar
    if [ ! -s "$rootfs" ]; then
      echo "build-image: mmdebstrap bookworm ($packages) -> $rootfs"
      timeout 900 mmdebstrap --quiet --variant=minbase --format=tar --include="$packages" \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        bookworm "$rootfs.tmp" http://deb.debian.org/debian
      mv "$rootfs.tmp" "$rootfs"
    fi
    ctr=$(buildah from scratch)
    trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
    timeout 300 buildah add --quiet "$ctr" "$rootfs" / >/dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
    timeout 300 buildah commit --quiet --rm "$ctr" "$base" >/dev/null
    trap - EXIT
  fi
  args+=(--build-arg "BASE=$base")
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp deploy/image/Containerfile "$context/"
echo "build-image: wheelhouse"
timeout 600 "$py" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$context/wheels" . 2>&1 \
  | { grep -v "^WARNING: Location" || true; } >&2
echo "build-image: buildah bud -> $tag"
timeout 900 buildah bud --quiet --isolation chroot --format docker --layers=false "${args[@]}" \
  -f "$context/Containerfile" \
  -t "$tag" "$context" >/dev/null
echo "build-image: ok ($tag)"
