"""Where an image's time goes (bench/image_time.py): the stages read from the service's own histograms between two
scrapes, shown as the bucket that holds each median, and the images' CPU section beside the short text's."""

from __future__ import annotations

import math

from bench.cpu import CpuReading, ProcessCpu
from bench.image_time import BATCH_METRIC, CALL_METRIC, PREPARE_METRIC, Stage, Stages, median_bucket, read, section, stage_table

BOUNDS = ("1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "+Inf")


def _histogram(metric: str, labels: str, cumulative: tuple[int, ...]) -> str:
    return "\n".join(f'{metric}_bucket{{{labels},le="{le}",replica="r1"}} {n}' for le, n in zip(BOUNDS, cumulative))


def _scrape(calls: tuple[int, ...], cancelled: tuple[int, ...], batches: tuple[int, ...], sizes: tuple[int, ...],
            prepared: tuple[int, ...] = (0,) * 8) -> str:
    return "\n".join([
        _histogram(PREPARE_METRIC, 'deployment="ImageModel",model="image"', prepared),
        _histogram(CALL_METRIC, 'deployment="ModerationIngress",outcome="ok",target="image"', calls),
        _histogram(CALL_METRIC, 'deployment="ModerationIngress",outcome="cancelled",target="image"', cancelled),
        _histogram(CALL_METRIC, 'deployment="ModerationIngress",outcome="ok",target="text"', (9,) * 8),
        _histogram(BATCH_METRIC, 'deployment="ImageModel",model="image"', batches),
        _histogram("ray_moderation_model_batch_size", 'deployment="ImageModel",model="image"', sizes),
    ])  # fmt: skip


def test_the_median_is_the_bucket_that_holds_the_middle_observation():
    # 10 observations: 1 under 5 ms, 3 in 5-10, 6 in 10-20: the 5th is in 10-20.
    assert median_bucket({5.0: 1, 10.0: 4, 20.0: 10, math.inf: 10}) == (10.0, 20.0)
    assert median_bucket({1.0: 3, 2.0: 3, math.inf: 4}) == (0.0, 1.0)
    assert median_bucket({30000.0: 1, math.inf: 3}) == (30000.0, math.inf)
    assert median_bucket({1.0: 0, math.inf: 0}) is None


def test_the_stages_are_what_was_observed_between_the_two_scrapes_answered_calls_only():
    before = _scrape(calls=(0, 0, 0, 2, 2, 2, 2, 2), cancelled=(0,) * 8, batches=(0, 0, 2, 2, 2, 2, 2, 2),
                     sizes=(2, 2, 2, 2, 2, 2, 2, 2))
    # Since: 10 ok calls, 7 of them 20-50 ms, 3 of 50-100; 4 cancelled in 50-100 (not counted); 10 batches of one,
    # 6 of them 10-20 ms.
    after = _scrape(calls=(0, 0, 0, 2, 2, 9, 12, 12), cancelled=(0, 0, 0, 0, 0, 0, 4, 4),
                    batches=(0, 0, 2, 6, 12, 12, 12, 12), sizes=(12,) * 8, prepared=(0, 0, 7, 10, 10, 10, 10, 10))
    reading = CpuReading(1, 9, 0, 6.0, p50_s=0.0423)
    stages = read(before, after, reading)
    assert stages.call == Stage(10, (20.0, 50.0))
    assert stages.batch == Stage(10, (10.0, 20.0))
    assert stages.prepare == Stage(10, (2.0, 5.0))  # 7 of 10 uploads prepared in 2-5 ms
    assert stages.mean_batch == 1.0 and stages.client_p50_s == 0.0423 and stages.requests == 9


def test_the_stage_table_shows_buckets_not_figures_made_from_them():
    stages = Stages(1, 95, 0.0701, Stage(97, (50.0, 100.0)), Stage(97, (0.0, 1.0)), 1.0)
    table = stage_table(stages, decode_s=0.0065)
    assert table[2].endswith("| 70.1 ms | 95 requests | the load generator |")
    assert "| 50-100 ms | 97 calls |" in table[3]
    assert "(1.00 images a batch on average) | under 1 ms | 97 batches |" in table[4]
    assert "| 6.5 ms |" in table[5]
    prepared = stage_table(Stages(1, 95, 0.07, Stage(97, (50.0, 100.0)), Stage(97, (20.0, 30.0)), 2.5,
                                  Stage(97, (5.0, 7.5))), decode_s=0.0065)
    assert "| 5-7.5 ms | 97 uploads | `ray_moderation_image_prepare_latency_ms` |" in prepared[4]
    nothing = stage_table(Stages(1, 0, None, Stage(0, None), Stage(0, None), None), decode_s=0.0)
    assert "| none observed | 0 calls |" in nothing[3] and "(unknown images a batch on average)" in nothing[4]


def _reading(clients: int, requests: int, title: str, cpu_s: float) -> CpuReading:
    return CpuReading(clients, requests, 0, 6.0, [ProcessCpu(title, cpu_s)], 0.3, 0.0, "1.00/1.00/1.00", 0.05)


def test_the_image_section_is_the_cpu_table_titled_for_images_then_the_stages():
    image_model = "ray::ServeReplica:moderation:ImageModel"
    readings = {"graph": {1: _reading(1, 100, image_model, 2.0), 16: _reading(16, 200, image_model, 3.0)},
                "plain": {1: _reading(1, 120, "python -m bench.plain", 2.4)}}
    stages = Stages(1, 100, 0.05, Stage(101, (20.0, 50.0)), Stage(101, (10.0, 20.0)), 1.0)
    lines = section(readings, stages, 0.006, cores=2)
    assert lines[0] == "## CPU per request, by process (image, nsfw only)"
    assert "| ms of CPU per request | graph, 1 client | graph, 16 clients | plain app, 1 client |" in lines
    assert "| ImageModel replicas | 20.00 | 15.00 |  |" in lines
    assert "| **service in all** | 20.00 | 15.00 | 20.00 |" in lines
    stages_title = "### An image's wall time by stage (graph, 1 client)"
    assert lines.index(stages_title) > lines.index("| ImageModel replicas | 20.00 | 15.00 |  |")
    assert section(readings, None, 0.006, cores=2)[-2].startswith("| load average")
    assert not any(line.startswith("| the model's mean batch") for line in lines)  # none was read
    readings["graph"][16].batch_mean = 4.25
    assert "| the model's mean batch over the run (the service's histogram) |  | 4.25 |  |" in section(
        readings, None, 0.006, cores=2)
    assert section({}, stages, 0.006, cores=2) == []
