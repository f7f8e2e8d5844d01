"""Slurm output parsers on real output captured from Slurm 22.05 (tests/data/slurm/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.fleet.slurmtext import (
    JobInfo,
    SlurmParseError,
    parse_sbatch,
    parse_scontrol_jobs,
    parse_sinfo_nodes,
    parse_squeue,
    split_key_values,
)

DATA = Path(__file__).parents[1] / "data" / "slurm"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_sbatch_parsable_gives_the_job_id():
    assert parse_sbatch(read("sbatch-parsable.txt")) == "10"
    assert parse_sbatch("4242;cluster2\n") == "4242"


def test_sbatch_error_text_is_not_a_job_id():
    with pytest.raises(SlurmParseError, match="Invalid node name"):
        parse_sbatch(read("sbatch-invalid-node.txt"))


def test_squeue_every_state_and_reason():
    jobs = {j.job_id: j for j in parse_squeue(read("squeue-states.txt"))}
    assert set(jobs) == {"2", "3", "4", "5", "6", "7", "8", "9", "10"}
    assert jobs["3"] == JobInfo("3", "FAILED", "NonZeroExitCode", "n2", "h-n2")
    pending = jobs["5"]
    assert (pending.state, pending.nodes) == ("PENDING", "")
    assert pending.reason == "ReqNodeNotAvail, UnavailableNodes:n4"
    assert pending.name == 'h-n4 weird"name' and not pending.started and not pending.finished
    assert jobs["8"].state == "TIMEOUT" and jobs["8"].reason == "TimeLimit" and jobs["8"].finished
    assert jobs["10"].state == "RUNNING" and jobs["10"].started and not jobs["10"].finished
    assert jobs["7"].state == "CANCELLED" and jobs["2"].reason == ""


def test_squeue_rejects_another_layout():
    with pytest.raises(SlurmParseError, match="line 1"):
        parse_squeue("JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)\n")


def test_scontrol_one_line_records_carry_exit_codes():
    jobs = {j.job_id: j for j in parse_scontrol_jobs(read("scontrol-show-job-o.txt"))}
    assert jobs["3"].state == "FAILED" and (jobs["3"].exit_code, jobs["3"].exit_signal) == (3, 0)
    assert jobs["3"].describe() == "FAILED (NonZeroExitCode, exit 3)"
    assert jobs["7"].state == "CANCELLED" and jobs["7"].exit_signal == 15
    assert jobs["5"].name == 'h-n4 weird"name'
    assert jobs["5"].reason == "ReqNodeNotAvail, UnavailableNodes:n4" and jobs["5"].nodes == ""
    assert jobs["2"].describe() == "COMPLETED" and jobs["2"].nodes == "n1"


def test_scontrol_multi_line_record_of_a_timed_out_job():
    (job,) = parse_scontrol_jobs(read("scontrol-show-job-timeout.txt"))
    assert (job.job_id, job.state, job.reason, job.nodes) == ("8", "TIMEOUT", "TimeLimit", "n2")
    assert (job.exit_code, job.exit_signal) == (0, 15)
    assert job.describe() == "TIMEOUT (TimeLimit, signal 15)"


def test_key_values_keep_spaces_and_equals_signs_inside_values():
    kv = split_key_values("JobId=5 JobName=a b c TRES=cpu=2,mem=2410M,node=1 Power= ReqB:S:C:T=0:0:*:*")
    assert kv == {"JobId": "5", "JobName": "a b c", "TRES": "cpu=2,mem=2410M,node=1", "Power": "",
                  "ReqB:S:C:T": "0:0:*:*"}


def test_sinfo_states_and_operator_reason():
    nodes = parse_sinfo_nodes(read("sinfo-nodes-drain.txt"))
    assert list(nodes) == ["n1", "n2", "n3", "n4"]
    assert nodes["n4"].drained and nodes["n4"].reason == "operator: bad fan"
    assert not nodes["n3"].drained and nodes["n3"].state == "allocated" and nodes["n3"].reason == ""


def test_sinfo_harness_drain_reasons_survive_braces_and_commas():
    nodes = parse_sinfo_nodes(read("sinfo-nodes-harness-drains.txt"))
    assert nodes["n1"].reason == ("harness: fio fio.bw{job=seqread_1m,rw=read} measured 0.05 GB/s, "
                                  "expected >= 0.1 GB/s")
    assert nodes["n3"].reason.startswith("harness: app ") and nodes["n4"].reason == "operator: bad fan"


def test_sinfo_lists_a_node_in_two_partitions_once():
    nodes = parse_sinfo_nodes("n1|idle|none\nn1|idle|none\nn2|draining|harness: x | y\n")
    assert list(nodes) == ["n1", "n2"] and nodes["n2"].reason == "harness: x | y" and nodes["n2"].drained
