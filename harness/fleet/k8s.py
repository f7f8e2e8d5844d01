"""Kubernetes manifests for the harness (`harness k8s render`): pure dicts, dumped as YAML.

    Job        one per node (acceptance): pinned by nodeSelector kubernetes.io/hostname, every GPU
               requested from the device plugin, privileged for /dev, /sys, DMI and NVMe; results to
               the results volume as <node>/<run>/ (`harness fleet report VOLUME` reads it)
    CronJob    one per node, the same pod on a schedule (the quarterly inspection)
    DaemonSet  the read-only health suite (prolog) on every GPU node, every --interval, its
               node-problem-detector status written to the host for NPD's custom plugin
               (deploy/npd/harness-health.sh reads it)

Each pod has host network (NCCL, iperf3, RDMA), host PID (observe sees the node's processes) and
NODE_NAME from the downward API, which `harness run` takes as the node's name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.errors import UsageError

KINDS = ("job", "cronjob", "daemonset")
GPU_RESOURCE = "nvidia.com/gpu"
RESULTS_MOUNT = "/results"
NPD_DIR = "/var/lib/harness/npd"  # on the host: where the DaemonSet leaves NPD's status
LOCK_DIR = "/run/harness"  # on the host: the node's run lock, shared by every harness pod
NPD_STATUS = "npd.status"
HEALTH_DIR = "/var/lib/harness/health"  # on the host: the health suite's own runs
QUARTERLY = "0 6 1 1,4,7,10 *"  # 06:00 on the first day of each quarter
_DNS = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class Settings:
    """What every manifest shares."""

    suite: str
    image: str
    namespace: str = "harness"
    profile: str | None = None
    gpus: int = 8  # requested from the device plugin (0: none requested)
    privileged: bool = True
    results_pvc: str | None = None  # an RWX PersistentVolumeClaim, else the hostPath below
    results_hostpath: str = "/var/lib/harness/results"
    prom_textfile: str | None = None  # node_exporter's textfile directory on the host
    schedule: str = QUARTERLY
    interval_s: int = 300  # the DaemonSet's health runs
    health_suite: str = "prolog"
    deadline_s: int = 4 * 3600  # a Job's activeDeadlineSeconds
    runtime_class: str | None = None  # e.g. nvidia, where NVIDIA's runtime is not the default


def dns_name(*parts: str) -> str:
    """A DNS-1123 label (63 characters at most) from parts: lower case, '-' for anything else."""
    text = "-".join(p for p in (_DNS.sub("-", part.lower()).strip("-") for part in parts) if p)
    return text[:63].rstrip("-") or "harness"


def _run_args(s: Settings, suite: str, output: str, *extra: str) -> list[str]:
    """`harness run` in the pod; the kubelet expands $(NODE_NAME) in a container's args."""
    args = ["harness", "run", suite, "--node", "$(NODE_NAME)", "--output", output]
    if s.profile:
        args += ["--profile", s.profile]
    if s.prom_textfile:
        args += ["--prom-textfile", "/textfile"]
    return [*args, *extra]


def _volumes(s: Settings, results: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    lock = {"path": LOCK_DIR, "type": "DirectoryOrCreate"}
    vols: list[dict[str, Any]] = [{"name": "sys", "hostPath": {"path": "/sys"}},
                                  {"name": "dev", "hostPath": {"path": "/dev"}},
                                  {"name": "lock", "hostPath": lock}]
    mounts: list[dict[str, Any]] = [{"name": n, "mountPath": p}
                                    for n, p in (("sys", "/sys"), ("dev", "/dev"), ("lock", LOCK_DIR))]
    if results:
        src = ({"persistentVolumeClaim": {"claimName": s.results_pvc}} if s.results_pvc
               else {"hostPath": {"path": s.results_hostpath, "type": "DirectoryOrCreate"}})
        vols.append({"name": "results", **src})
        mounts.append({"name": "results", "mountPath": RESULTS_MOUNT})
    if s.prom_textfile:
        vols.append({"name": "textfile", "hostPath": {"path": s.prom_textfile, "type": "DirectoryOrCreate"}})
        mounts.append({"name": "textfile", "mountPath": "/textfile"})
    return vols, mounts


def _container(s: Settings, command: list[str], args: list[str], mounts: list[dict[str, Any]],
               gpus: int) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": "harness", "image": s.image, "imagePullPolicy": "IfNotPresent",
        **({"command": command} if command else {}), "args": args,
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "securityContext": {"privileged": s.privileged},
        "volumeMounts": mounts,
    }
    if gpus:
        c["resources"] = {"limits": {GPU_RESOURCE: gpus}}
    return c


def _pod(s: Settings, container: dict[str, Any], volumes: list[dict[str, Any]], restart: str,
         node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": restart, "hostNetwork": True, "hostPID": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container], "volumes": volumes,
    }
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if s.runtime_class:
        spec["runtimeClassName"] = s.runtime_class
    return spec


def _meta(name: str, s: Settings, node: str | None = None, part: str = "acceptance",
          suite: str | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "gpu-acceptance-harness", "app.kubernetes.io/component": part,
              "harness/suite": dns_name(suite or s.suite)}
    if node is not None:
        labels["harness/node"] = dns_name(node)
    return {"name": name, "namespace": s.namespace, "labels": labels}


def _job_spec(s: Settings, node: str) -> dict[str, Any]:
    vols, mounts = _volumes(s)
    mine = f"{RESULTS_MOUNT}/$(NODE_NAME)"  # the node's history lives beside its runs, past the pod
    container = _container(s, [], _run_args(s, s.suite, mine, "--history", f"{mine}/history.sqlite"),
                           mounts, s.gpus)
    return {"backoffLimit": 0, "activeDeadlineSeconds": s.deadline_s, "ttlSecondsAfterFinished": 7 * 86400,
            "template": {"metadata": {"labels": _meta("", s, node)["labels"]},
                         "spec": _pod(s, container, vols, "Never", node)}}


def job(s: Settings, node: str) -> dict[str, Any]:
    """The acceptance Job of one node."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": _meta(dns_name("harness", s.suite, node), s, node), "spec": _job_spec(s, node)}


def cronjob(s: Settings, node: str) -> dict[str, Any]:
    """The node's scheduled run (quarterly by default); a run still going is not started twice."""
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": _meta(dns_name("harness", s.suite, node), s, node, "inspection"),
            "spec": {"schedule": s.schedule, "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 2,
                     "failedJobsHistoryLimit": 4, "jobTemplate": {"spec": _job_spec(s, node)}}}


def health_script(s: Settings) -> str:
    """The DaemonSet's loop (sh -c SCRIPT harness-health ARGS...): run ARGS (the health suite with
    --npd), leave '<exit code>' and its line for NPD's plugin atomically, sleep, again."""
    status = f"{NPD_DIR}/{NPD_STATUS}"
    return ('while :; do\n  line=$("$@"); rc=$?\n'
            f"  printf '%s\\n%s\\n' \"$rc\" \"$line\" > {status}.tmp && mv -f {status}.tmp {status}\n"
            f"  sleep {s.interval_s}\ndone\n")


def daemonset(s: Settings) -> dict[str, Any]:
    """The read-only health suite on every GPU node, for node-problem-detector; its runs stay on
    the node (HEALTH_DIR, the newest 5 kept), apart from the results volume's acceptance runs. It
    writes no textfile: a node has one harness.prom, its last Job's."""
    s = replace(s, prom_textfile=None)
    vols, mounts = _volumes(s, results=False)
    for name, path in (("npd", NPD_DIR), ("health", HEALTH_DIR)):
        vols.append({"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}})
        mounts.append({"name": name, "mountPath": path})
    args = _run_args(s, s.health_suite, HEALTH_DIR, "--npd", "--history", "off", "--keep", "5")
    container = _container(s, ["/bin/sh", "-c", health_script(s), "harness-health"], args, mounts, 0)
    pod = _pod(s, container, vols, "Always", None)
    pod["nodeSelector"] = {"nvidia.com/gpu.present": "true"}  # NVIDIA GPU feature discovery's label
    meta = _meta(dns_name("harness-health", s.health_suite), s, part="health", suite=s.health_suite)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
            "spec": {"selector": {"matchLabels": dict(meta["labels"])},
                     "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": dict(meta["labels"])}, "spec": pod}}}


def render(s: Settings, kinds: Sequence[str], nodes: Sequence[str]) -> list[dict[str, Any]]:
    """The manifests asked for, in the order of `kinds`, node by node."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise UsageError(f"unknown manifest kind {unknown[0]!r}; one of {', '.join(KINDS)}")
    if not nodes and any(k != "daemonset" for k in kinds):
        raise UsageError("a Job or CronJob is per node: give --nodes")
    out: list[dict[str, Any]] = []
    for k in kinds:
        if k == "daemonset":
            out.append(daemonset(s))
        else:
            out += [(job if k == "job" else cronjob)(s, n) for n in nodes]
    names = [(d["kind"], d["metadata"]["name"]) for d in out]
    clash = next((n for n in names if names.count(n) > 1), None)
    if clash is not None:
        raise UsageError(f"two nodes give the same {clash[0]} name {clash[1]!r} (names are cut to 63 "
                         "characters of a-z, 0-9 and '-')")
    return out


def dump(docs: Sequence[dict[str, Any]]) -> str:
    """The manifests as one multi-document YAML stream for `kubectl apply -f -`."""
    import yaml  # start-up: PyYAML loads only to render manifests

    return "".join("---\n" + yaml.safe_dump(d, sort_keys=False, default_flow_style=False) for d in docs)
