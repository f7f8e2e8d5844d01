"""`harness k8s render`: Kubernetes manifests on stdout, for `kubectl apply -f -`."""

from __future__ import annotations

import click


@click.group()
def k8s() -> None:
    """Run the harness on Kubernetes: Jobs, CronJobs and a health DaemonSet."""


@k8s.command()
@click.option("--suite", "-s", default="acceptance", show_default=True,
              help="suite the Jobs and CronJobs run (a name, or a file in the image)")
@click.option("--nodes", "-w", default="", help="hostlist of Kubernetes node names, e.g. 'gpu[001-128]'")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["job", "cronjob", "daemonset"]),
              help="what to render (repeatable; default: job)")
@click.option("--image", required=True, help="the harness image, e.g. registry.example/harness:0.1.0")
@click.option("--namespace", "-n", default="harness", show_default=True)
@click.option("--profile", "-p", help="profile for every node (default: each node chooses)")
@click.option("--gpus", type=click.IntRange(min=0), default=8, show_default=True,
              help="nvidia.com/gpu requested from the device plugin per Job (0: none)")
@click.option("--privileged/--no-privileged", default=True, show_default=True,
              help="privileged pods (/dev, /sys, DMI serials, NVMe, the BMC); without, only the device "
                   "plugin's GPUs")
@click.option("--results-pvc", metavar="CLAIM", help="an RWX PersistentVolumeClaim for results "
              "(default: a hostPath on each node)")
@click.option("--results-hostpath", default="/var/lib/harness/results", show_default=True,
              help="results on each node, as <node>/<run>/")
@click.option("--prom-textfile", metavar="HOSTDIR",
              help="node_exporter's textfile directory on the host: each Job's run writes harness.prom there")
@click.option("--schedule", default="0 6 1 1,4,7,10 *", show_default=True, help="the CronJobs' schedule")
@click.option("--health-suite", default="prolog", show_default=True, help="the DaemonSet's read-only suite")
@click.option("--interval", type=click.IntRange(min=30), default=300, show_default=True,
              help="seconds between the DaemonSet's health runs")
@click.option("--runtime-class", metavar="NAME",
              help="the pods' runtimeClassName (e.g. nvidia, where NVIDIA's runtime is not the default)")
def render(suite: str, nodes: str, kinds: tuple[str, ...], image: str, namespace: str, profile: str | None,
           gpus: int, privileged: bool, results_pvc: str | None, results_hostpath: str,
           prom_textfile: str | None, schedule: str, health_suite: str, interval: int,
           runtime_class: str | None) -> None:
    """Write the manifests to stdout (one YAML stream); apply with `kubectl apply -f -`."""
    # start-up: the manifests and ClusterShell load only for this command
    from harness.fleet import k8s as manifests
    from harness.fleet.dispatch import expand_nodes

    settings = manifests.Settings(suite=suite, image=image, namespace=namespace, profile=profile, gpus=gpus,
                                  privileged=privileged, results_pvc=results_pvc,
                                  results_hostpath=results_hostpath, prom_textfile=prom_textfile,
                                  schedule=schedule, interval_s=interval, health_suite=health_suite,
                                  runtime_class=runtime_class)
    names = expand_nodes(nodes) if nodes.strip() else []
    click.echo(manifests.dump(manifests.render(settings, kinds or ("job",), names)), nl=False)
