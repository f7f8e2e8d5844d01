"""`harness k8s render`: manifests that the real Kubernetes API schemas accept (kubernetes-validate,
strict, 1.29-1.33), one Job/CronJob per node pinned to it, the health DaemonSet; deploy/k8s/ is
what the command writes; and `harness fleet report` reads the results volume those Jobs fill."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from clihelp import ROOT, harness, write

kv = pytest.importorskip("kubernetes_validate")

VERSIONS = ("1.29.0", "1.30.0", "1.31.0", "1.32.0", "1.33.0")
IMAGE = "registry.example.com/gpu-acceptance-harness-gpu:0.1.0"
EXAMPLES = sorted((ROOT / "deploy" / "k8s").glob("*.yaml"))


def render(*args: str) -> list[dict]:
    r = harness("k8s", "render", *args)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def container(doc: dict) -> dict:
    spec = doc["spec"]
    pod = (spec["jobTemplate"]["spec"] if doc["kind"] == "CronJob" else spec)["template"]["spec"]
    (c,) = pod["containers"]
    return {**c, "_pod": pod}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_validates_against_the_api_schemas(version: str):
    docs = render("--suite", "acceptance", "--nodes", "gpu[001-003]", "--kind", "job", "--kind", "cronjob",
                  "--kind", "daemonset", "--image", IMAGE, "--results-pvc", "harness-results",
                  "--prom-textfile", "/var/lib/node_exporter/textfile", "--runtime-class", "nvidia")
    assert [d["kind"] for d in docs] == ["Job"] * 3 + ["CronJob"] * 3 + ["DaemonSet"]
    assert {container(d)["_pod"]["runtimeClassName"] for d in docs} == {"nvidia"}
    for d in docs:
        kv.validate(d, version, strict=True)
    broken = json.loads(json.dumps(docs[0]))
    broken["spec"]["template"]["spec"]["nodeSelektor"] = {}
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, version, strict=True)


def test_a_job_per_node_pinned_to_it_with_every_gpu_and_the_nodes_own_name():
    docs = render("--suite", "acceptance", "--nodes", "gpu[001-128]", "--image", IMAGE, "--profile",
                  "h100-sxm-8x")
    assert len(docs) == 128 and len({d["metadata"]["name"] for d in docs}) == 128
    d = docs[16]
    assert d["metadata"]["name"] == "harness-acceptance-gpu017"
    c = container(d)
    pod = c["_pod"]
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": "gpu017"}
    assert pod["hostNetwork"] and pod["hostPID"] and pod["restartPolicy"] == "Never"
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 8} and c["securityContext"]["privileged"]
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in c["env"]
    assert c["args"] == ["harness", "run", "acceptance", "--node", "$(NODE_NAME)", "--output",
                         "/results/$(NODE_NAME)", "--profile", "h100-sxm-8x", "--history",
                         "/results/$(NODE_NAME)/history.sqlite"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["results"]["hostPath"]["path"] == "/var/lib/harness/results"
    assert d["spec"]["backoffLimit"] == 0


def test_cronjob_is_quarterly_and_never_overlaps_and_the_daemonset_runs_the_health_suite():
    (cron,) = render("--suite", "quarterly", "--kind", "cronjob", "--nodes", "gpu001", "--image", IMAGE)
    assert cron["spec"]["schedule"] == "0 6 1 1,4,7,10 *" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    (ds,) = render("--kind", "daemonset", "--image", IMAGE, "--interval", "120")
    c = container(ds)
    assert c["command"][:2] == ["/bin/sh", "-c"] and "sleep 120" in c["command"][2]
    assert c["args"][:3] == ["harness", "run", "prolog"] and "--npd" in c["args"]
    assert "resources" not in c  # a health read takes no GPU from the device plugin
    assert "/results" not in {m["mountPath"] for m in c["volumeMounts"]}  # acceptance runs stay apart


def test_bad_requests_are_refused(tmp_path: Path):
    r = harness("k8s", "render", "--image", IMAGE)
    assert r.returncode == 2 and "give --nodes" in r.stderr
    r = harness("k8s", "render", "--image", IMAGE, "--nodes", "gpu[1-")
    assert r.returncode == 2 and "--nodes" in r.stderr
    long = "x" * 70
    r = harness("k8s", "render", "--image", IMAGE, "--nodes", f"{long}1,{long}2")
    assert r.returncode == 2 and "same Job name" in r.stderr


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_deploy_examples_are_what_the_command_renders(path: Path):
    first, rest = path.read_text().split("\n", 1)
    assert first.startswith("# harness k8s render ")
    argv = shlex.split(first.removeprefix("# harness "))
    r = harness(*argv)
    assert r.returncode == 0, r.stderr
    assert r.stdout == rest
    for d in yaml.safe_load_all(rest):
        kv.validate(d, VERSIONS[-1], strict=True)


LENIENT = "name: lenient\nhardware:\n  memory_min_bytes: 1048576\nexpectations: []\n"


def _suite(tmp_path: Path, floor: str) -> Path:
    return write(tmp_path / f"s{floor}.yaml", "name: k8s-e2e\nchecks:\n  - id: tmp-space\n    kind: command\n"
                 "    params:\n      argv: [df, -B1, --output=avail, /tmp]\n      loads_node: false\n"
                 "      metrics:\n"
                 "        - {name: prolog.tmp_free, unit: B, regex: '(?P<value>[0-9]+)\\s*$'}\n"
                 f"    expect:\n      - {{metric: prolog.tmp_free, min: {floor}, unit: B}}\n")


def test_fleet_report_reads_the_results_volume_the_jobs_write(tmp_path: Path):
    """Each Job runs `harness run S --node $(NODE_NAME) --output /results/$(NODE_NAME)`; the volume
    then holds <node>/<run>/ and the node's history, and `fleet report VOLUME` judges the fleet."""
    volume = tmp_path / "results"
    (job,) = render("--nodes", "gpu001", "--image", IMAGE)
    args = container(job)["args"][1:]
    profile = write(tmp_path / "lenient.yaml", LENIENT)
    for node, floor in (("gpu001", "1"), ("gpu002", "1"), ("gpu003", "1.0e+18")):
        argv = [a.replace("$(NODE_NAME)", node).replace("/results", str(volume)) for a in args]
        argv[1] = str(_suite(tmp_path, floor))
        r = harness(*argv, "--profile", str(profile), env={"NODE_NAME": node, "HARNESS_LOCK_FILE":
                                                           str(tmp_path / f"{node}.lock")})
        assert r.returncode == (1 if node == "gpu003" else 0), r.stdout + r.stderr
    dirs = [p.name for p in (volume / "gpu001").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(dirs) == 1, dirs
    (run,) = dirs
    assert run.startswith("gpu001-")
    assert (volume / "gpu001" / "history.sqlite").is_file()
    r = harness("fleet", "report", str(volume), "--prom-textfile", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr  # gpu003 was rejected
    fleet = json.loads((volume / "fleet.json").read_text())
    assert fleet["suite"] == "k8s-e2e" and fleet["counts"]["ACCEPTED"] == 2
    nodes = {n["node"]: n for n in fleet["nodes"]}
    assert set(nodes) == {"gpu001", "gpu002", "gpu003"} and nodes["gpu003"]["status"] == "REJECTED"
    assert nodes["gpu001"]["run_dir"].startswith("gpu001/gpu001-")
    assert (volume / nodes["gpu001"]["run_dir"] / "report.html").is_file()
    assert 'node="gpu003"' in (tmp_path / "harness.prom").read_text()
    assert [d["node"] for d in fleet["drain"]] == ["gpu003"]
    r = harness("fleet", "report", str(volume), "--drain-failed")
    assert r.returncode == 2 and "kubectl cordon" in r.stderr
    r = harness("fleet", "resume", str(volume))
    assert r.returncode == 2 and "kubectl uncordon" in r.stderr
    r = harness("fleet", "status", str(volume))  # nothing to ask Slurm: the runs say it
    assert r.returncode == 1 and "gpu003" in r.stdout and "REJECTED" in r.stdout, r.stdout + r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = harness("fleet", "report", str(empty))
    assert r.returncode == 2 and "nor a results volume" in r.stderr
