"""Numbers in words, the one place for them: durations, sizes, rates and shares in the unit that
fits, axis labels, and counts with their noun ("1 file", "3 processes"), as every page, table and
line of ioassess writes them. Sizes are in powers of 1024 (KiB, MiB, GiB)."""
import datetime
import math

NO_VALUE = "–"
PLURALS = {"process": "processes"}   # nouns whose plural is not the noun and an "s"


def count_text(count, noun):
    """1 file, 3 files, 2 processes (the noun's last word takes the plural)."""
    return f"{count} {noun if count == 1 else plural(noun)}"


def plural(noun):
    head, _, last = noun.rpartition(" ")
    last = PLURALS.get(last, last + "es" if last.endswith("s") else last + "s")
    return f"{head} {last}" if head else last


def _three_digits(number):
    if number == 0:
        return "0"
    decimals = max(0, 2 - math.floor(math.log10(abs(float(f"{number:.3g}")))))
    return f"{number:.{decimals}f}"


def seconds_text(value):
    """Three significant digits in the unit that fits: 1.23 h, 45.6 min, 7.80 s, 12.0 ms, 3.40 µs."""
    if value is None:
        return NO_VALUE
    rounded = abs(float(f"{value:.3g}"))   # so that 999.96 ms is 1.00 s, not 1000 ms
    for unit, scale in (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if rounded >= scale * (1 - 1e-9) or unit == "ns":
            return f"{_three_digits(value / scale)} {unit}"


def bytes_text(value):
    """512 B, 3.0 KiB, 1.5 GiB."""
    if value is None:
        return NO_VALUE
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024


def rate_text(mib_per_s):
    """Three significant digits: 1724 MiB/s, 35.2 MiB/s, 0.0123 MiB/s."""
    return NO_VALUE if mib_per_s is None else f"{_three_digits(mib_per_s)} MiB/s"


def share_text(value):
    return NO_VALUE if value is None else f"{100 * value:.1f} %"


def interval_text(low, high, unit=seconds_text):
    """One value when both ends agree within 1 %, else "low – high"."""
    if high - low <= 0.01 * max(abs(high), 1e-12):
        return unit(high)
    return f"{unit(low)} – {unit(high)}"


def clock_text(epoch_s):
    """The local time of day, HH:MM:SS."""
    return datetime.datetime.fromtimestamp(epoch_s).strftime("%H:%M:%S")


def seconds_label(value):
    """An axis label: 1 s, 10 ms, 2.5 µs."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if value >= scale * 0.999:
            return f"{value / scale:g} {unit}"
    return f"{value:g} s"


def bytes_label(size):
    """A size in the largest unit it is a whole number of (64 MiB, 4 KiB, 1536 B): axis labels
    and sizes a user gave."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{int(size) // scale} {unit}"
    return f"{int(size)} B"
