"""Tools and Python packages several check kinds use, with install hints (`harness list --tools`).

A kind lists its own in `CheckKind.requires`; the ones shared by several kinds live here.
"""

from __future__ import annotations

from harness.checks.base import Need
from harness.platform.proc import INSTALL_HINTS

TORCH_HINT = ("pip install 'gpu-acceptance-harness[torch]' (PyTorch with CUDA; a CUDA 13 build needs an "
              "R580+ driver: on R535-R570 install torch from PyTorch's cu126 index first)")
# DCGM 4 comes per CUDA major version of the driver (nvidia-smi's "CUDA Version": 12 up to R570, 13 from R580)
DCGM_HINT = ("NVIDIA DCGM 4: apt-get install datacenter-gpu-manager-4-cuda12 (R535-R570 drivers) or "
             "datacenter-gpu-manager-4-cuda13 (R580+), from NVIDIA's CUDA repository; nv-hostengine running")
CUPY_HINT = "pip install cupy-cuda12x (CuPy for CUDA 12)"
DRIVER_HINT = "the NVIDIA driver: apt-get install nvidia-driver-<branch> (or NVIDIA's .run installer)"
NCCL_TESTS_HINT = ("build github.com/NVIDIA/nccl-tests (make MPI=1 CUDA_HOME=... NCCL_HOME=...) and put its "
                   "build/ on PATH")
PERFTEST_HINT = "apt-get install perftest rdma-core"


def tool(name: str, use: str = "", group: str = "", version_args: tuple[str, ...] = ("--version",)) -> Need:
    """A program on PATH, with its Debian package."""
    return Need(name, INSTALL_HINTS.get(name, f"install {name} and put it on PATH"), use=use, group=group,
                version_args=version_args)




def nvidia_smi(use: str = "") -> Need:
    """nvidia-smi, asked for the driver's version (it fails, saying why, when the driver is not loaded)."""
    return Need("nvidia-smi", DRIVER_HINT, use=use,
                version_args=("--query-gpu=driver_version", "--format=csv,noheader"))


NVML = Need("pynvml", "pip install nvidia-ml-py (a harness dependency) with the NVIDIA driver's libnvidia-ml",
            python=True)


def torch(use: str, group: str = "") -> Need:
    return Need("torch", TORCH_HINT, python=True, use=use, group=group)


def cupy(use: str, group: str = "") -> Need:
    return Need("cupy", CUPY_HINT, python=True, use=use, group=group)
