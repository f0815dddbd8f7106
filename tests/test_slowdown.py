"""Slowdown per time interval and op kind (ioassess.models.slowdown), against numpy's quantiles
computed op kind by op kind and interval by interval."""
import json

import numpy as np
import pytest

from ioassess.models.slowdown import (EXCLUSION_REASONS, MAX_INTERVALS, MIN_INTERVAL_SECONDS, TARGET_INTERVALS,
                                      automatic_interval_seconds, slowdown_by_interval)


def ops(seed=0, count=20_000, span_s=600.0):
    rng = np.random.default_rng(seed)
    start = np.sort(rng.uniform(100.0, 100.0 + span_s, count))
    kinds = rng.choice(["read", "write", "fsync"], count)
    expected = np.where(kinds == "read", 1e-4, 5e-4)
    # reads slow down fourfold in the second half of the job
    slowdown = rng.lognormal(0.0, 0.5, count) * np.where((kinds == "read") & (start > 100.0 + span_s / 2), 4.0, 1.0)
    return start, expected * slowdown, expected, kinds


def test_quantiles_per_interval_and_kind_match_numpy():
    start, observed, expected, kinds = ops()
    result = slowdown_by_interval(start, observed, expected, kinds)
    assert [kind.kind for kind in result.kinds] == ["fsync", "read", "write"]
    interval = ((start - result.origin_seconds) // result.interval_seconds).astype(int)
    ratio = observed / expected
    for kind in result.kinds:
        mine = kinds == kind.kind
        for index in range(result.interval_count):
            values = ratio[mine & (interval == index)]
            assert kind.count[index] == values.size
            if values.size:
                assert (kind.median[index], kind.p90[index], kind.p99[index]) == pytest.approx(
                    tuple(np.quantile(values, [0.5, 0.9, 0.99])), rel=1e-12)
            else:
                assert np.isnan(kind.median[index])
        assert kind.total_count == np.count_nonzero(mine)
        assert (kind.total_median, kind.total_p90, kind.total_p99) == pytest.approx(
            tuple(np.quantile(ratio[mine], [0.5, 0.9, 0.99])), rel=1e-12)


def test_the_slowdown_shows_when_and_where_it_happened():
    start, observed, expected, kinds = ops()
    result = slowdown_by_interval(start, observed, expected, kinds)
    reads = next(kind for kind in result.kinds if kind.kind == "read")
    writes = next(kind for kind in result.kinds if kind.kind == "write")
    half = result.interval_count // 2
    assert np.median(reads.median[:half - 1]) == pytest.approx(1.0, rel=0.15)
    assert np.median(reads.median[half + 1:]) == pytest.approx(4.0, rel=0.15)
    assert np.median(writes.median[half + 1:]) == pytest.approx(1.0, rel=0.15)


def test_automatic_width_gives_about_fifty_intervals_of_round_length():
    for span in (0.0005, 0.3, 1.0, 10.0, 60.0, 77.0, 600.0, 3600.0, 5000.0, 86_400.0, 1e6):
        width = automatic_interval_seconds(span)
        mantissa = width / 10 ** np.floor(np.log10(width))
        assert mantissa == pytest.approx(1) or mantissa == pytest.approx(2) or mantissa == pytest.approx(5)
        assert 32 <= span / width + 1 <= 80
    assert automatic_interval_seconds(0.0) == MIN_INTERVAL_SECONDS
    assert automatic_interval_seconds(1e-5) == MIN_INTERVAL_SECONDS  # 11 intervals: at least 1 us each
    assert automatic_interval_seconds(0.5) == pytest.approx(0.01)   # a short job's 50 intervals
    start, observed, expected, kinds = ops(span_s=600.0)
    result = slowdown_by_interval(start, observed, expected, kinds)
    assert (result.interval_seconds, result.interval_count) == (10.0, 60)
    assert TARGET_INTERVALS == 50


def test_given_width_and_interval_membership_by_start():
    result = slowdown_by_interval([0.0, 0.99, 1.0, 2.5], [1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0], [0, 0, 0, 0],
                                  interval_seconds=1.0)
    assert result.interval_count == 3
    assert result.kinds[0].count == (2, 1, 1)
    assert result.kinds[0].median == (1.5, 3.0, 4.0)
    assert result.as_dict()["kinds"]["0"]["median"] == [1.5, 3.0, 4.0]


def test_invalid_ops_are_left_out_and_counted_by_reason():
    start = [0.0, np.nan, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    observed = [1.0, 1.0, np.nan, 0.0, -1.0, 1.0, 1.0, 1.0, 1.0]
    expected = [1.0, 1.0, 1.0, 1.0, 1.0, np.inf, 0.0, -2.0, 1e-320]
    result = slowdown_by_interval(start, observed, expected, ["r"] * 9)
    assert result.count == 1
    assert result.excluded == dict(zip(EXCLUSION_REASONS, [1, 3, 3, 1]))
    assert result.excluded_count == 8
    json.dumps(result.as_dict(), allow_nan=False)


def test_no_valid_op():
    result = slowdown_by_interval([np.nan], [1.0], [1.0], ["read"])
    assert (result.count, result.interval_count, result.kinds) == (0, 0, ())
    assert result.as_dict()["excluded_count"] == 1
    empty = slowdown_by_interval([], [], [], [])
    assert empty.count == 0 and empty.excluded_count == 0


def test_empty_intervals_are_none_in_json():
    result = slowdown_by_interval([0.0, 10.0], [1.0, 2.0], [1.0, 1.0], ["read", "read"], interval_seconds=2.0)
    as_json = json.loads(json.dumps(result.as_dict(), allow_nan=False))
    assert as_json["kinds"]["read"]["count"] == [1, 0, 0, 0, 0, 1]
    assert as_json["kinds"]["read"]["median"] == [1.0, None, None, None, None, 2.0]
    assert as_json["interval_starts_seconds"] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert as_json["quantiles"] == {"median": 0.5, "p90": 0.9, "p99": 0.99}


@pytest.mark.parametrize("width", [0.0, -1.0, np.nan, np.inf])
def test_the_width_must_be_positive_and_finite(width):
    with pytest.raises(ValueError, match="interval_seconds"):
        slowdown_by_interval([0.0], [1.0], [1.0], ["read"], interval_seconds=width)


def test_sequences_must_be_equally_long():
    with pytest.raises(ValueError, match="differ in length"):
        slowdown_by_interval([0.0, 1.0], [1.0], [1.0, 1.0], ["read", "read"])


def test_too_many_intervals_is_an_error():
    with pytest.raises(ValueError, match=str(MAX_INTERVALS)):
        slowdown_by_interval([0.0, 1e6], [1.0, 1.0], [1.0, 1.0], ["read", "read"], interval_seconds=1e-3)
