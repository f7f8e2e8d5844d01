"""The pure half of data_path: saturation, the required rate, the feed ratio in words, parsing."""

from __future__ import annotations

import pytest

from harness.checks import data_path_feed as feed
from harness.engines.data_path import ALIGN, record_sizes


def step(workers: int, gbps: float, seconds: float = 2.0, samples: int = 100) -> feed.Step:
    return feed.Step(workers, int(gbps * 1e9 * seconds), samples, seconds, True)


@pytest.mark.parametrize("rates, workers, saturated", [
    ({1: 0.5, 2: 0.9, 4: 1.6, 8: 1.7, 16: 1.65}, 4, True),   # 1.6 is within 10% of 1.7
    ({1: 0.5, 2: 1.0, 4: 2.0, 8: 4.0}, 8, False),             # still doubling at the top
    ({1: 2.0, 2: 2.05, 4: 1.9}, 1, True),                      # one worker already saturates
    ({4: 3.0}, 4, None),                                       # one step cannot tell
])
def test_saturation_is_the_fewest_workers_near_the_best(rates, workers, saturated):
    sat = feed.saturation([step(n, r) for n, r in rates.items()], 0.1)
    assert (sat.workers, sat.saturated) == (workers, saturated)
    assert sat.best_gbps == pytest.approx(max(rates.values()))


def test_saturation_orders_steps_and_takes_the_tolerance():
    steps = [step(8, 1.7), step(1, 0.5), step(4, 1.5)]
    assert feed.saturation(steps, 0.1).workers == 8  # 1.5 < 0.9 x 1.7
    assert feed.saturation(steps, 0.2).workers == 4  # 1.5 >= 0.8 x 1.7
    with pytest.raises(ValueError):
        feed.saturation([], 0.1)


def test_step_rates():
    s = feed.Step(4, 3_000_000_000, 1500, 2.0, True)
    assert (s.gbps, s.samples_per_s) == (1.5, 750.0)
    assert feed.Step(1, 10, 1, 0.0, False).gbps == 0.0


@pytest.mark.parametrize("ratio, words", [
    (2.31, "storage can feed 2.3x what the GPUs consume"),
    (0.6, "I/O-bound: feeds 0.6x of what the GPUs consume"),
    (0.96, "I/O-bound: feeds 0.96x of what the GPUs consume"),  # never "feeds 1.0x" when short
    (1.0, "storage can feed 1.00x what the GPUs consume"),
    (12.4, "storage can feed 12x what the GPUs consume"),
    (0.0042, "I/O-bound: feeds 0.0042x of what the GPUs consume"),
])
def test_verdict_words(ratio, words):
    assert feed.verdict(ratio) == words


def test_gpu_count_sources():
    assert feed.gpu_count(4, {"gpu": {"count": 8}}, {"gpus": [{}]}) == (4, "param gpus")
    assert feed.gpu_count(None, {"gpu": {"count": 8}}, {"gpus": [{}]}) == (8, "profile hardware.gpu.count")
    assert feed.gpu_count(None, {"gpu": {"count": 0}}, {"gpus": [{}, {}]}) == (2, "found")
    assert feed.gpu_count(None, {}, {}) == (1, "none found, 1 assumed")


def test_requirement_precedence_and_arithmetic():
    gpus = (8, "profile hardware.gpu.count")
    kw = {"required_gbps": None, "per_gpu_gbps": None, "per_gpu_samples_per_s": None,
          "sample_bytes": 110_000.0, "gpus": gpus, "profile_gpu_gbps": None}
    assert feed.requirement(**kw) is None
    prof = feed.requirement(**{**kw, "profile_gpu_gbps": 0.27})
    assert prof is not None and prof.gbps == pytest.approx(2.16)
    assert "profile hardware.gpu_input_gbps" in prof.how and "x 8 GPUs" in prof.how
    per = feed.requirement(**{**kw, "per_gpu_samples_per_s": 2470, "profile_gpu_gbps": 0.27})
    assert per is not None and per.gbps == pytest.approx(2470 * 110_000 * 8 / 1e9)  # params win
    assert "2470 samples/s per GPU" in per.how
    node = feed.requirement(**{**kw, "required_gbps": 5.0, "profile_gpu_gbps": 0.27})
    assert node is not None and (node.gbps, node.how) == (5.0, "5 GB/s for the node (param required_gbps)")
    gpu = feed.requirement(**{**kw, "per_gpu_gbps": 0.5})
    assert gpu is not None and gpu.gbps == 4.0


def test_summary_names_verdict_peak_and_saturation():
    steps = [step(1, 0.5), step(2, 0.95), step(4, 1.0)]
    sat = feed.saturation(steps, 0.1)
    text = feed.summary(steps, sat, feed.Requirement(2.0, "x"), "O_DIRECT, host memory only")
    assert text.startswith("I/O-bound: feeds 0.5x of what the GPUs consume (1.00 of 2.00 GB/s needed)")
    assert "saturates at 2 workers (0.95 GB/s)" in text and "O_DIRECT, host memory only" in text
    assert "no required input rate" in feed.summary(steps, sat, None, "w")


def test_parse_reads_the_worker_protocol_and_ignores_noise():
    # synthetic lines in the worker's format (real runs of the worker are in test_check_data_path)
    text = ('warning: something on stderr-like noise\n'
            '{"event": "start", "backend": "host", "devices": [], "io": "O_DIRECT", "files": 3}\n'
            '{"event": "result", "workers": 2, "bytes": 3000, "samples": 3, "seconds": 0.5, '
            '"complete": true, "errors": 1, "first_errors": ["/d/a: Input/output error"]}\n')
    out = feed.parse(text)
    assert out.start["io"] == "O_DIRECT" and not out.errors
    assert out.step == feed.Step(2, 3000, 3, 0.5, True, 1, ("/d/a: Input/output error",))
    bad = feed.parse('{"event": "result", "workers": 2}\n{"event": "error", "message": "boom"}')
    assert bad.step is None and bad.errors[0].startswith("malformed result line") and bad.errors[1] == "boom"


def test_record_sizes_are_aligned_in_range_and_reach_the_total():
    sizes = record_sizes(64 * 2**20, 64 * 1024, 4 * 2**20, seed=1)
    assert sum(sizes) >= 64 * 2**20 and sum(sizes[:-1]) < 64 * 2**20
    assert all(s % ALIGN == 0 and 64 * 1024 <= s <= 4 * 2**20 for s in sizes)
    assert len(set(sizes)) > len(sizes) // 2  # spread, not one size
    assert sizes == record_sizes(64 * 2**20, 64 * 1024, 4 * 2**20, seed=1)  # reproducible
    assert record_sizes(0, 8192, 8192, seed=0, count=5) == [8192] * 5
