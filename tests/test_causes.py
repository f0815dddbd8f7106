"""Linear cause models: segmented lines, their fit, classification, time lost, memory layout."""
import numpy as np
import pytest

from ioassess.models.causes import (CLASSES, JOINT_BYTES, LAYOUT_UNKNOWN, UNALIGNED, UNCLASSIFIED, CauseModel,
                                    ModelLine, SegmentedLine, bound_order_violations, cached_typical_seconds, classify,
                                    fit_segmented_line, fit_separating_line, fit_upper_envelope, line_errors,
                                    memory_layout_codes,
                                    time_lost_seconds)

MEMCPY, CACHED, UNCACHED, SLOW = range(4)
READ, WRITE, SYNC = 0, 1, 2
OFF0, RND = 0, 1
KiB, MiB = 1 << 10, 1 << 20
SIZES = 2 ** np.arange(25)  # 1 B .. 16 MiB


def joined(intercept_s, slope_s_per_byte, large_slope_s_per_byte):
    joint_s = intercept_s + slope_s_per_byte * JOINT_BYTES
    return SegmentedLine(intercept_s, slope_s_per_byte, joint_s - large_slope_s_per_byte * JOINT_BYTES,
                         large_slope_s_per_byte)


def constant(seconds):
    return SegmentedLine(seconds, 0.0, seconds, 0.0)


def model_of(lines):
    """A model from {(op, class, layout): (bound, typical)}."""
    return CauseModel("test", "", {},
                      {key: ModelLine(bound, typical, {}, "") for key, (bound, typical) in lines.items()})


# ---- segmented lines and the 4096 B joint ----

def test_the_small_segment_applies_up_to_4096_bytes_and_the_large_one_above():
    line = SegmentedLine(1.0, 0.0, 2.0, 0.0)
    assert line.predict([1, JOINT_BYTES, JOINT_BYTES + 1, 16 * MiB]).tolist() == [1.0, 1.0, 2.0, 2.0]


def test_a_fitted_line_is_continuous_at_the_joint():
    sizes = np.repeat(SIZES, 3)
    seconds = joined(2e-6, 5e-10, 2.5e-10).predict(sizes) * np.tile([0.95, 1.0, 1.05], len(SIZES))
    line = fit_segmented_line(sizes, seconds)
    small_at_joint = line.small_intercept_s + line.small_slope_s_per_byte * JOINT_BYTES
    large_at_joint = line.large_intercept_s + line.large_slope_s_per_byte * JOINT_BYTES
    assert large_at_joint == pytest.approx(small_at_joint, rel=1e-12)
    assert line.predict(JOINT_BYTES + 1) - line.predict(JOINT_BYTES) == pytest.approx(line.large_slope_s_per_byte)


# ---- fitting ----

def test_fit_recovers_a_known_line_from_noisy_points():
    truth = joined(2e-6, 5e-10, 2.5e-10)
    sizes = np.repeat(SIZES, 50)
    rng = np.random.default_rng(7)
    seconds = truth.predict(sizes) * rng.lognormal(0.0, 0.05, len(sizes))
    line = fit_segmented_line(sizes, seconds)
    assert line.small_intercept_s == pytest.approx(2e-6, rel=0.03)
    assert line.small_slope_s_per_byte == pytest.approx(5e-10, rel=0.05)
    assert line.large_slope_s_per_byte == pytest.approx(2.5e-10, rel=0.02)
    assert np.all(np.abs(line.predict(SIZES) / truth.predict(SIZES) - 1) < 0.03)


def test_upper_envelope_covers_every_point_and_touches_the_highest():
    rng = np.random.default_rng(3)
    truth = joined(2e-6, 5e-10, 2.5e-10)
    seconds = truth.predict(SIZES) * rng.lognormal(0.0, 0.2, len(SIZES))
    line = fit_upper_envelope(SIZES, seconds)
    ratio = line.predict(SIZES) / seconds
    assert np.all(ratio >= 1 - 1e-9)
    assert np.min(ratio[SIZES <= JOINT_BYTES]) == pytest.approx(1.0)
    large_at_joint = line.large_intercept_s + line.large_slope_s_per_byte * JOINT_BYTES
    assert line.predict(JOINT_BYTES) == pytest.approx(large_at_joint)
    # tight: the large segment's slope is the least that covers its points
    large = SIZES > JOINT_BYTES
    flatter = line.large_slope_s_per_byte * 0.99
    joint_s = line.predict(JOINT_BYTES)
    assert np.any(joint_s + flatter * (SIZES[large] - JOINT_BYTES) < seconds[large])


def test_upper_envelope_of_points_on_a_line_is_that_line():
    truth = joined(3e-6, 2e-10, 1e-10)
    line = fit_upper_envelope(SIZES, truth.predict(SIZES))
    assert np.allclose(line.predict(SIZES), truth.predict(SIZES), rtol=1e-9)


def test_upper_envelope_over_a_step_at_the_page_size_stays_above_both_sides():
    # sub-page writes to an uncached file read the page first; whole pages do not
    sizes = np.array([1, 64, 1024, 4096, 16 * KiB, MiB])
    seconds = np.array([55e-6, 54e-6, 56e-6, 3e-6, 5e-6, 900e-6])
    line = fit_upper_envelope(sizes, seconds)
    assert np.all(line.predict(sizes) >= seconds * (1 - 1e-9))
    assert line.small_slope_s_per_byte == 0.0 and line.small_intercept_s == pytest.approx(56e-6)


def _lognormal_by_size(line, sigma, seed, count=400):
    rng = np.random.default_rng(seed)
    return {int(size): line.predict(np.full(count, size)) * rng.lognormal(0.0, sigma, count) for size in SIZES}


def _bounds(durations_by_size):
    return {size: 1.1 * np.percentile(durations, 99) for size, durations in durations_by_size.items()}


def test_separating_line_puts_each_class_on_its_side():
    faster = _lognormal_by_size(joined(1e-6, 1e-10, 1e-10), 0.15, 1)
    slower = _lognormal_by_size(joined(3e-6, 3e-10, 3e-10), 0.15, 2)
    line = fit_separating_line(faster, slower, _bounds(faster))
    for size in SIZES:
        bound = line.predict(size)
        assert np.mean(faster[size] <= bound) > 0.97 and np.mean(slower[size] > bound) > 0.97, size


def test_separating_line_separates_a_class_whose_cost_per_byte_falls_with_size():
    # per byte, the faster class gets cheaper with size (as copies do): its durations are not on
    # one line, but the gap to the slower class leaves room for one between them
    faster = {size: durations * min(1.0, (4096 / size) ** 0.15)
              for size, durations in _lognormal_by_size(joined(1e-6, 1e-10, 1e-10), 0.1, 3).items()}
    slower = _lognormal_by_size(joined(5e-6, 5e-10, 5e-10), 0.1, 4)
    line = fit_separating_line(faster, slower, _bounds(faster))
    right = [np.mean(faster[size] <= line.predict(size)) + np.mean(slower[size] > line.predict(size)) for size in SIZES]
    assert min(right) > 1.95


def test_separating_line_where_the_slower_state_is_not_slower_keeps_the_faster_class():
    faster = _lognormal_by_size(joined(2e-6, 1e-10, 1e-10), 0.1, 5)
    slower = _lognormal_by_size(joined(40e-6, 0.0, 1e-10), 0.1, 6)
    for size in SIZES[SIZES > 4096]:                 # above the page size the "slower" state is as fast
        slower[int(size)] = faster[int(size)] * 0.9
    faster[16 << 20][0] = 1.0                        # one outlier of a second: not chased
    line = fit_separating_line(faster, slower, _bounds(faster))
    for size in SIZES:
        assert np.mean(faster[int(size)] <= line.predict(size)) > 0.97, size
        assert line.predict(size) < 2 * _bounds(faster)[int(size)], size
    assert np.mean(slower[1] > line.predict(1)) > 0.97


def test_one_small_size_gives_a_flat_small_segment():
    line = fit_segmented_line([512, 512, 8 * KiB], [1e-6, 1e-6, 3e-6])
    assert line.small_slope_s_per_byte == 0.0
    assert line.small_intercept_s == pytest.approx(1e-6)
    assert line.predict(8 * KiB) == pytest.approx(3e-6)


def test_a_slow_16_mib_point_does_not_swamp_the_fit_at_8_kib():
    # Bandwidth 4 GB/s from 8 KiB to 8 MiB; 16 MiB is four times slower (as Lustre's cached
    # 4-16 MiB writes in the paper).
    small_sizes = np.array([1, 64, 1024, 4096])
    large_sizes = 2 ** np.arange(13, 25)
    truth = joined(1e-6, 0.0, 2.5e-10)
    seconds = truth.predict(large_sizes)
    seconds[-1] *= 4
    line = fit_segmented_line(np.concatenate([small_sizes, large_sizes]),
                              np.concatenate([truth.predict(small_sizes), seconds]))
    assert line.predict(8 * KiB) == pytest.approx(truth.predict(8 * KiB), rel=0.10)
    assert line.predict(MiB) == pytest.approx(truth.predict(MiB), rel=0.10)
    # Ordinary least squares through the joint would follow the 16 MiB point.
    run = large_sizes - JOINT_BYTES
    unweighted_slope = np.sum(run * (seconds - 1e-6)) / np.sum(run * run)
    assert 1e-6 + unweighted_slope * 4 * KiB > 2 * truth.predict(8 * KiB)


def test_durations_falling_with_size_give_flat_segments_not_negative_slopes():
    sizes = np.array([1, 1024, 4096, 8192, MiB, 16 * MiB])
    seconds = np.array([5e-6, 4e-6, 3e-6, 2.9e-6, 2.5e-6, 2e-6])
    line = fit_segmented_line(sizes, seconds)
    assert line.small_slope_s_per_byte == 0.0 and line.large_slope_s_per_byte == 0.0
    assert line.small_intercept_s > 0
    assert np.all(np.diff(line.predict(SIZES)) >= 0)


def test_a_negative_small_intercept_is_clipped_and_the_slope_refitted():
    sizes = np.array([1024, 2048, 4096, 8192])
    seconds = 1e-9 * (sizes - 512.0)  # extrapolates below 0 at 0 B
    line = fit_segmented_line(sizes, seconds)
    assert line.small_intercept_s == 0.0
    assert line.small_slope_s_per_byte > 0
    assert np.all(line.predict(SIZES) >= 0)


@pytest.mark.parametrize("sizes, seconds, problem", [
    ([1, 4096], [1e-6, 2e-6], "a segmented line needs points of at most and of more than 4096 B"),
    ([8192, 16384], [1e-6, 2e-6], "a segmented line needs points of at most and of more than 4096 B"),
    ([1, 8192], [0.0, 2e-6], "durations must be positive and finite"),
    ([1, 8192], [np.nan, 2e-6], "durations must be positive and finite"),
])
def test_fit_refuses_points_it_cannot_fit(sizes, seconds, problem):
    with pytest.raises(ValueError, match=problem):
        fit_segmented_line(sizes, seconds)


def test_line_errors_are_table_3_metrics_per_segment():
    errors = line_errors(constant(1.0), [1, 2, 8192, 8192, 8192, 8192], [0.5, 2.0, 1.0, 1.0, 1.0, 4.0])
    assert errors["small"] == {"abs_err_s": 0.75, "rel_err_pct": 75.0, "outlier_pct_experiment": None,
                               "outlier_pct_model": 50.0}
    assert errors["large"] == {"abs_err_s": 0.75, "rel_err_pct": 18.75, "outlier_pct_experiment": None,
                               "outlier_pct_model": 25.0}
    assert line_errors(constant(1.0), [1], [1.0])["large"] == dict.fromkeys(errors["large"])
    with pytest.raises(ValueError, match="durations must be positive and finite"):
        line_errors(constant(1.0), [1, 2], [1.0, 0.0])


def test_bounds_out_of_order_are_named():
    lines = model_of({("read", "memcpy", "off0"): (constant(2e-6), None),
                      ("read", "cached", "off0"): (joined(1e-6, 1e-9, 1e-9), None)}).lines
    assert bound_order_violations(lines) == [
        "read off0: the cached bound (1e-06 s) is below the memcpy bound (2e-06 s) at 1 B"]


# ---- classification ----

FULL = model_of({
    ("read", "memcpy", "off0"): (constant(1e-6), constant(0.5e-6)),
    ("read", "cached", "off0"): (joined(1e-5, 1e-9, 2e-10), joined(5e-6, 0.5e-9, 1e-10)),
    ("read", "uncached", "off0"): (constant(1e-2), constant(1e-3)),
    ("read", "memcpy", "rnd"): (constant(2e-6), constant(1e-6)),
    ("read", "cached", "rnd"): (constant(2e-5), constant(1e-5)),
    ("read", "uncached", "rnd"): (constant(2e-2), constant(2e-3)),
})


def classify_one(model, direction, size, duration, layout):
    return int(classify(model, [direction], [size], [duration], [layout])[0])


@pytest.mark.parametrize("size", [1, 4096, 4097, 16 * MiB])
@pytest.mark.parametrize("cls", ["memcpy", "cached", "uncached"])
def test_a_duration_at_a_bound_is_that_class_and_just_above_is_the_next(cls, size):
    bound = float(FULL.lines[("read", cls, "off0")].bound.predict(size))
    code = CLASSES.index(cls)
    assert classify_one(FULL, READ, size, bound, OFF0) == code
    assert classify_one(FULL, READ, size, np.nextafter(bound, 0), OFF0) == code
    assert classify_one(FULL, READ, size, np.nextafter(bound, 1), OFF0) == code + 1


def test_the_segment_at_the_op_size_decides_around_the_joint():
    cached = FULL.lines[("read", "cached", "off0")].bound
    at_joint = float(cached.predict(JOINT_BYTES))
    assert classify_one(FULL, READ, JOINT_BYTES, at_joint + 1e-10, OFF0) == UNCACHED
    # One byte more is in the large segment, whose slope leaves room for the same duration.
    assert classify_one(FULL, READ, JOINT_BYTES + 1, at_joint + 1e-10, OFF0) == CACHED


def test_classify_is_vectorised_over_ops_of_both_layouts():
    durations = [0.5e-6, 5e-6, 1e-4, 0.1, 1.5e-6, 1.5e-5, 1.5e-2, 0.1]
    codes = classify(FULL, [READ] * 8, [512] * 8, durations, [OFF0] * 4 + [RND] * 4)
    assert codes.tolist() == [MEMCPY, CACHED, UNCACHED, SLOW, MEMCPY, CACHED, UNCACHED, SLOW]


def test_without_an_uncached_line_everything_above_cached_is_uncached_never_slow():
    model = model_of({key: (line.bound, line.typical) for key, line in FULL.lines.items() if key[1] != "uncached"})
    assert classify(model, [READ, READ], [512, 512], [1e-4, 100.0], [OFF0, OFF0]).tolist() == [UNCACHED, UNCACHED]


def test_a_missing_layout_falls_back_to_the_other_layout_of_the_class():
    model = model_of({("write", "memcpy", "rnd"): (constant(1e-6), None),
                      ("write", "cached", "off0"): (constant(1e-5), constant(5e-6)),
                      ("write", "cached", "rnd"): (constant(2e-5), constant(1e-5))})
    codes = classify(model, [WRITE] * 3, [64] * 3, [0.9e-6, 1.5e-6, 1.5e-5], [OFF0] * 3)
    assert codes.tolist() == [MEMCPY, CACHED, UNCACHED]


def test_a_class_with_no_line_for_the_op_is_skipped():
    model = model_of({("read", "memcpy", "off0"): (constant(1e-6), None),
                      ("read", "uncached", "rnd"): (constant(1e-3), None)})
    codes = classify(model, [READ] * 3, [64] * 3, [1e-7, 1e-5, 1e-2], [OFF0] * 3)
    assert codes.tolist() == [MEMCPY, UNCACHED, SLOW]


def test_above_the_only_line_is_the_next_class():
    model = model_of({("read", "memcpy", "off0"): (constant(1e-6), None)})
    assert classify_one(model, READ, 64, 1e-5, OFF0) == CACHED


def test_an_unknown_layout_is_classified_as_rnd():
    # Between the off0 and the rnd cached bounds: uncached as off0, cached as rnd.
    codes = classify(FULL, [READ] * 3, [512] * 3, [1.5e-5] * 3, [OFF0, RND, LAYOUT_UNKNOWN])
    assert codes.tolist() == [UNCACHED, CACHED, CACHED]


def test_sync_ops_and_ops_without_lines_are_unclassified():
    codes = classify(FULL, [SYNC, WRITE, READ], [0, 512, 512], [1e-3, 1e-6, 1e-6], [LAYOUT_UNKNOWN, OFF0, OFF0])
    assert codes.tolist() == [UNCLASSIFIED, UNCLASSIFIED, MEMCPY]
    assert classify(FULL, [], [], [], []).tolist() == []


# ---- time lost against cached ----

def test_time_lost_is_the_duration_above_the_cached_typical_line():
    typical = FULL.lines[("read", "cached", "off0")].typical
    sizes = np.array([512, 512, 512, MiB])
    expected_typical = typical.predict(sizes)
    durations = expected_typical * np.array([1.0, 0.5, 3.0, 1.5])
    lost = time_lost_seconds(FULL, [READ] * 4, sizes, durations, [OFF0] * 4)
    np.testing.assert_allclose(lost, [0.0, 0.0, 2 * expected_typical[2], 0.5 * expected_typical[3]])
    np.testing.assert_allclose(cached_typical_seconds(FULL, [READ] * 4, sizes, [OFF0] * 4), expected_typical)


def test_time_lost_uses_the_rnd_line_for_unknown_layout_and_is_zero_for_sync():
    lost = time_lost_seconds(FULL, [READ, READ, SYNC], [512, 512, 0], [3e-5, 3e-5, 1.0],
                             [RND, LAYOUT_UNKNOWN, LAYOUT_UNKNOWN])
    np.testing.assert_allclose(lost, [2e-5, 2e-5, 0.0])


def test_time_lost_is_unknown_without_a_cached_typical_line():
    model = model_of({("read", "cached", "off0"): (constant(1e-5), None)})
    assert np.isnan(time_lost_seconds(model, [READ], [512], [1e-3], [OFF0])).all()


# ---- memory layout ----

def test_memory_layout_compares_with_the_previous_op_of_the_same_thread():
    # Sorted by (process, start), as TraceSet.ops; threads interleave.
    process = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1], np.int32)
    tid = np.array([11, 12, 11, 11, 11, 12, 11, 11, 11], np.uint32)
    buffer = np.array([0xA00, 0xA00, 0xA00, 0, 0xA00, 0xB00, 0xA00, 0xA00, 0xC00], np.uint64)
    expected = [RND,  # first op of thread 11
                RND,  # first op of thread 12, although thread 11 used the address just before
                OFF0,  # thread 11 again, same address
                LAYOUT_UNKNOWN,  # no address (e.g. fsync)
                OFF0,  # compared with thread 11's last op with an address
                RND,  # thread 12, new address
                RND,  # process 1's first op: same tid number and address as process 0's, no reuse
                OFF0,
                RND]
    assert memory_layout_codes(buffer, tid, process).tolist() == expected
    # the same addresses 16 bytes off the cache line: the -unaligned twin of each layout
    unaligned = np.where(buffer != 0, buffer + 16, 0).astype(np.uint64)
    assert memory_layout_codes(unaligned, tid, process).tolist() == \
        [code + UNALIGNED if code != LAYOUT_UNKNOWN else code for code in expected]


def test_memory_layout_without_addresses_is_unknown():
    assert memory_layout_codes(np.zeros(3, np.uint64), np.ones(3, np.uint32), np.zeros(3, np.int32)).tolist() == \
        [LAYOUT_UNKNOWN] * 3
