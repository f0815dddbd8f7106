"""The report's plots as inline SVG text: log-log scatter plots with lines, and stacked bars.

Drawn here rather than with matplotlib because a report must come out in well under a second
(importing matplotlib alone takes half of one) and the page's size must not grow with the data:
points are drawn as one path per class of small squares, a few bytes each, from a bounded
sample. Every text placed in a plot is escaped. What shows data (a bar, a line, a point, a
measured cell) has class "mark" and the plot's frame class "frame", so that a page's check can
tell a chart that draws something from an empty one (tests/browser_helpers.py). Tick labels are
thinned until neighbours no longer overlap, and a plot is as wide as its legend needs.
"""
import math
from html import escape

import numpy as np

from ioassess.units import bytes_label, seconds_label

MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 150, 28, 44
FONT = 'font-family="sans-serif" font-size="11"'
LABEL_CHAR_PX = 7   # the width of a digit at FONT's size, with room to spare
LABEL_LINE_PX = 13  # the height of a line of FONT's text
LABEL_GAP_PX = 4    # at least this between neighbouring tick labels
ISOLATED_POINT_PX = 6  # the length of the level line that draws a point of a line plot with no neighbour
LEGEND_LEFT_PX, LEGEND_TEXT_PX = 12, 18  # a legend's swatches after the plot's right edge, its texts after them


class _Axes:
    """Maps data to pixels: log10 (or linear) on each axis."""

    def __init__(self, width, height, x_range, y_range, x_log, y_log):
        self.width, self.height = width, height
        self.x_log, self.y_log = x_log, y_log
        self.x0, self.x1 = (math.log10(v) if x_log else v for v in x_range)
        self.y0, self.y1 = (math.log10(v) if y_log else v for v in y_range)
        self.plot_width = width - MARGIN_LEFT - MARGIN_RIGHT
        self.plot_height = height - MARGIN_TOP - MARGIN_BOTTOM

    def x(self, values):
        values = np.log10(values) if self.x_log else np.asarray(values, float)
        return MARGIN_LEFT + (values - self.x0) / (self.x1 - self.x0) * self.plot_width

    def y(self, values):
        values = np.log10(values) if self.y_log else np.asarray(values, float)
        return MARGIN_TOP + self.plot_height - (values - self.y0) / (self.y1 - self.y0) * self.plot_height


def _spaced(ticks, position, label_px):
    """Every so many of the (value, label) ticks, from the first, so that no two labels that
    stay overlap: position(value) in px, label_px(label) the label's extent along the axis."""
    ticks = sorted(ticks, key=lambda tick: position(tick[0]))
    for every in range(1, len(ticks) + 1):
        kept = ticks[::every]
        if all(position(b[0]) - position(a[0]) >= (label_px(a[1]) + label_px(b[1])) / 2 + LABEL_GAP_PX
               for a, b in zip(kept, kept[1:])):
            return kept
    return ticks[:1]


def _frame(axes, title, x_label, y_label, x_ticks, y_ticks):
    x_ticks = _spaced(x_ticks, lambda v: float(axes.x([v])[0]), lambda label: len(label) * LABEL_CHAR_PX)
    y_ticks = _spaced(y_ticks, lambda v: -float(axes.y([v])[0]), lambda label: LABEL_LINE_PX)
    parts = [f'<rect class="frame" x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{axes.plot_width}" '
             f'height="{axes.plot_height}" fill="none" stroke="#444"/>',
             f'<text x="{MARGIN_LEFT + axes.plot_width / 2:.0f}" y="16" text-anchor="middle" {FONT} '
             f'font-weight="bold">{escape(title)}</text>',
             f'<text x="{MARGIN_LEFT + axes.plot_width / 2:.0f}" y="{axes.height - 6}" text-anchor="middle" '
             f'{FONT}>{escape(x_label)}</text>',
             f'<text transform="translate(14 {MARGIN_TOP + axes.plot_height / 2:.0f}) rotate(-90)" '
             f'text-anchor="middle" {FONT}>{escape(y_label)}</text>']
    bottom = MARGIN_TOP + axes.plot_height
    for value, label in x_ticks:
        x = float(axes.x([value])[0])
        parts.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#444"/>'
                     f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle" {FONT}>{escape(label)}</text>')
    for value, label in y_ticks:
        y = float(axes.y([value])[0])
        parts.append(f'<line x1="{MARGIN_LEFT - 4}" y1="{y:.1f}" x2="{MARGIN_LEFT}" y2="{y:.1f}" stroke="#444"/>'
                     f'<line x1="{MARGIN_LEFT}" y1="{y:.1f}" x2="{MARGIN_LEFT + axes.plot_width}" y2="{y:.1f}" '
                     'stroke="#eee"/>'
                     f'<text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" {FONT}>{escape(label)}</text>')
    return parts


def _legend(axes, width, entries):
    """The legend's parts and the plot's width with room for its longest label; entries: (label,
    colour, kind) with kind "point", "line" or "dashed"."""
    parts = []
    x = MARGIN_LEFT + axes.plot_width + LEGEND_LEFT_PX
    for i, (label, colour, kind) in enumerate(entries):
        y = MARGIN_TOP + 8 + 16 * i
        if kind == "point":
            parts.append(f'<rect x="{x}" y="{y - 4}" width="8" height="8" fill="{colour}"/>')
        else:
            dash = ' stroke-dasharray="4 3"' if kind == "dashed" else ""
            parts.append(f'<line x1="{x - 2}" y1="{y}" x2="{x + 12}" y2="{y}" stroke="{colour}" '
                         f'stroke-width="1.5"{dash}/>')
        parts.append(f'<text x="{x + LEGEND_TEXT_PX}" y="{y + 4}" {FONT}>{escape(label)}</text>')
    longest = max((len(label) for label, _, _ in entries), default=0) * LABEL_CHAR_PX
    return parts, max(width, math.ceil(x + LEGEND_TEXT_PX + longest + LABEL_GAP_PX))


def _svg(width, height, parts, description):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img"><title>{escape(description)}</title>'
            + "".join(parts) + "</svg>")


def _decades(low, high):
    return [10.0 ** e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)]


def scatter_plot(title, groups, lines, description, x_label="access size", width=640, height=400):
    """Durations (s) against sizes (bytes), both log scales. groups: (label, colour, sizes,
    seconds) drawn as points (a point drawn once per pixel square, however many fall on it);
    lines: (label, colour, dashed, sizes, seconds)."""
    sizes = np.concatenate([np.asarray(g[2], float) for g in groups] + [np.zeros(0)])
    seconds = np.concatenate([np.asarray(g[3], float) for g in groups] + [np.zeros(0)])
    sizes, seconds = np.maximum(sizes, 1), np.maximum(seconds, 1e-9)
    x_range = (1.0, max(2.0 * float(sizes.max(initial=1)), 1 << 12))
    y_low = 10 ** math.floor(math.log10(float(seconds.min(initial=1e-6))))
    y_high = 10 ** math.ceil(math.log10(float(seconds.max(initial=1e-3)) * 1.01))
    axes = _Axes(width, height, x_range, (y_low, y_high), True, True)
    step = max(1, math.ceil(math.log2(x_range[1]) / 8))
    x_ticks = [(2.0 ** e, bytes_label(2 ** e)) for e in range(0, int(math.log2(x_range[1])) + 1, step)]
    y_ticks = [(v, seconds_label(v)) for v in _decades(y_low, y_high)]
    parts = _frame(axes, title, x_label, "duration", x_ticks, y_ticks)
    parts.append(f'<clipPath id="c{id(axes)}"><rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{axes.plot_width}" '
                 f'height="{axes.plot_height}"/></clipPath><g clip-path="url(#c{id(axes)})">')
    for label, colour, dashed, line_sizes, line_seconds in lines:
        keep = np.asarray(line_sizes, float) <= x_range[1]
        xs, ys = axes.x(np.asarray(line_sizes, float)[keep]), axes.y(np.maximum(np.asarray(line_seconds)[keep], 1e-12))
        path = "M" + "L".join(f"{x:.1f} {y:.1f}" for x, y in zip(xs, ys))
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        parts.append(f'<path class="mark" d="{path}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>')
    for label, colour, group_sizes, group_seconds in groups:
        xs = axes.x(np.maximum(np.asarray(group_sizes, float), 1))
        ys = axes.y(np.maximum(np.asarray(group_seconds, float), 1e-9))
        squares = "".join(dict.fromkeys(f"M{x:.0f} {y:.0f}h3v3h-3z" for x, y in zip(xs - 1.5, ys - 1.5)))
        parts.append(f'<path class="mark" d="{squares}" fill="{colour}" fill-opacity="0.6"/>')
    parts.append("</g>")
    entries = [(label, colour, "point") for label, colour, _, _ in groups] + \
        [(label, colour, "dashed" if dashed else "line") for label, colour, dashed, _, _ in lines]
    legend, width = _legend(axes, width, entries)
    return _svg(width, height, parts + legend, description)


def stacked_bars(title, starts, width_s, series, description, x_label="time since job start",
                 y_label="I/O time per interval", x_ticks=None, markers=(), width=900, height=260):
    """Seconds per bin of x (time, ranks), one stacked bar per bin; series: (label, colour,
    values); x_ticks: (x, label) pairs, by default round seconds; markers: (label, colour,
    values) drawn as a short line across each bar at that height (e.g. the maximum of the bin)."""
    totals = np.sum([np.asarray(values, float) for _, _, values in series], axis=0) if series else np.zeros(1)
    marked = [np.asarray(values, float) for _, _, values in markers]
    top = max(float(totals.max(initial=0)), *(float(m.max(initial=0)) for m in marked), 0.0) or 1.0
    end = float(starts[-1] + width_s) if len(starts) else 1.0
    axes = _Axes(width, height, (0.0, end), (0.0, top * 1.05), False, False)
    x_ticks = x_ticks if x_ticks is not None else [(v, f"{v:g} s") for v in _nice_ticks(end)]
    y_ticks = [(v, seconds_label(v) if v > 0 else "0") for v in _nice_ticks(top * 1.05)]
    parts = _frame(axes, title, x_label, y_label, x_ticks, y_ticks)
    bottom = np.zeros(len(starts))
    bar_width = max(float(axes.x([width_s])[0] - axes.x([0.0])[0]), 0.5)
    xs = axes.x(np.asarray(starts, float))
    for label, colour, values in series:
        values = np.asarray(values, float)
        y_top, y_bottom = axes.y(bottom + values), axes.y(bottom)
        bars = "".join(f"M{x:.1f} {yb:.1f}V{yt:.1f}h{bar_width:.1f}V{yb:.1f}z"
                       for x, yt, yb, v in zip(xs, y_top, y_bottom, values) if v > 0)
        parts.append(f'<path class="mark" d="{bars}" fill="{colour}"/>')
        bottom += values
    for (label, colour, _), values in zip(markers, marked):
        ticks = "".join(f"M{x:.1f} {y:.1f}h{bar_width:.1f}" for x, y, v in zip(xs, axes.y(values), values) if v > 0)
        parts.append(f'<path class="mark" d="{ticks}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
    legend, width = _legend(axes, width, [(label, colour, "point") for label, colour, _ in series] +
                            [(label, colour, "line") for label, colour, _ in markers])
    return _svg(width, height, parts + legend, description)


def _nice_ticks(high, count=5):
    """About `count` round tick values from 0 to high."""
    if high <= 0:
        return [0.0]
    step = 10 ** math.floor(math.log10(high / count))
    for factor in (1, 2, 5, 10):
        if high / (step * factor) <= count:
            step *= factor
            break
    return [i * step for i in range(int(high / step) + 1)]


def line_plot(title, x_label, y_label, series, description, log_x=False, width=900, height=280):
    """Lines over a linear (or log2) x axis and a log10 y axis; series: (label, colour, dashed,
    xs, ys), a None in ys breaks the line (a point between two breaks is a short level line)."""
    xs_all = np.array([x for s in series for x in s[3]], float)
    ys_all = np.array([y for s in series for y in s[4] if y is not None and y > 0], float)
    if not len(xs_all) or not len(ys_all):
        return None
    x_low, x_high = float(xs_all.min()), float(xs_all.max())
    if not log_x:
        x_low = min(x_low, 0.0)   # a time axis starts at the job's start
    if x_high <= x_low:
        x_high = x_low * 2 if log_x else x_low + 1
    y_low = 10 ** math.floor(math.log10(ys_all.min()))
    y_high = 10 ** math.ceil(math.log10(ys_all.max() * 1.01))
    axes = _Axes(width, height, (x_low, x_high), (y_low, y_high), log_x, True)
    if log_x:
        x_ticks = [(2.0 ** e, f"{2 ** e:g}") for e in range(int(math.log2(x_low)), int(math.log2(x_high)) + 1)]
    else:
        x_ticks = [(v, f"{v:g}") for v in _nice_ticks(x_high) if v >= x_low]
    y_ticks = [(v, f"{v:g}") for v in _decades(y_low, y_high)]
    parts = _frame(axes, title, x_label, y_label, x_ticks, y_ticks)
    for label, colour, dashed, xs, ys in series:
        runs, points = [], []
        for x, y in zip(xs, ys):
            if y is None or y <= 0:
                runs.append(points)
                points = []
            else:
                points.append((float(axes.x([x])[0]), float(axes.y([y])[0])))
        # a point with no neighbour to join is drawn as a short level line across it
        path = ["M" + "L".join(f"{x:.1f} {y:.1f}" for x, y in run) if len(run) > 1 else
                f"M{run[0][0] - ISOLATED_POINT_PX / 2:.1f} {run[0][1]:.1f}h{ISOLATED_POINT_PX}"
                for run in runs + [points] if run]
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        parts.append(f'<path class="mark" d="{"".join(path)}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>')
    legend, width = _legend(axes, width, [(label, colour, "dashed" if dashed else "line")
                                          for label, colour, dashed, _, _ in series])
    return _svg(width, height, parts + legend, description)


SLOWEST_MEASURED, FASTEST_MEASURED = np.array((237, 248, 233)), np.array((35, 139, 69))
JOB_COLOUR = "#1f77b4"
# A cell this wide (px) or wider shows its MiB/s as text, besides its tooltip.
LABELLED_CELL_PX = 34


def io_model_grid(processes, per_file, name, measured=(), width=460, height=360):
    """Sisneros' grid: log2 of the processes doing I/O across, log2 of the processes per file
    up (at most the processes). Serial at the bottom left, file per process along the bottom,
    shared file on the diagonal. measured: the site's cells, (P, k, MiB/s, tooltip), shaded by
    MiB/s from light to dark green (the fastest); the job's cell is filled, or outlined when
    the site measured it."""
    top = max(3, math.ceil(math.log2(max([processes, 1] + [m[0] for m in measured]))) + 1)
    axes = _Axes(width, height, (-0.5, top - 0.5), (-0.5, top - 0.5), False, False)
    widest = len(str(2 ** (top - 1))) * LABEL_CHAR_PX
    parts = _frame(axes, "I/O model", "processes doing I/O (P)", "processes per file (k)",
                   power_of_two_ticks(top, axes.plot_width / top, widest),
                   power_of_two_ticks(top, axes.plot_height / top, LABEL_LINE_PX))
    job_cell = (round(math.log2(max(processes, 1))), round(math.log2(max(per_file, 1))))
    fastest = max((m[2] for m in measured), default=1.0)
    by_cell = {(round(math.log2(p)), round(math.log2(k))): (rate, tip) for p, k, rate, tip in measured}
    side_x, side_y = axes.plot_width / top, axes.plot_height / top
    for x in range(top):
        for y in range(x + 1):
            left, upper = float(axes.x([x - 0.5])[0]) + 1, float(axes.y([y + 0.5])[0]) + 1
            rect = f'x="{left:.1f}" y="{upper:.1f}" width="{side_x - 2:.1f}" height="{side_y - 2:.1f}"'
            if (x, y) not in by_cell:   # the job's cell filled, the others grey (not marks: nothing measured)
                kind, fill = ('class="mark" ', JOB_COLOUR) if (x, y) == job_cell else ("", "#f3f3f3")
                parts.append(f'<rect {kind}{rect} fill="{fill}"/>')
                continue
            rate, tip = by_cell[(x, y)]
            parts.append(f'<rect class="mark" {rect} fill="{_shade(rate / fastest)}"><title>{escape(tip)}</title>'
                         '</rect>')
            if side_x >= LABELLED_CELL_PX:
                parts.append(f'<text x="{left + side_x / 2 - 1:.1f}" y="{upper + side_y / 2 + 3:.1f}" '
                             f'text-anchor="middle" {FONT}>{_rate_label(rate)}</text>')
            if (x, y) == job_cell:
                parts.append(f'<rect class="mark" {rect} fill="none" stroke="{JOB_COLOUR}" stroke-width="3"/>')
    entries = [(f"this job: {name}", JOB_COLOUR, "point")]
    if measured:
        entries += [(f"fastest: {_rate_label(fastest)} MiB/s", _shade(1.0), "point"),
                    ("slower (site's sweep)", _shade(0.3), "point")]
    legend, width = _legend(axes, width, entries)
    return _svg(width, height, parts + legend, f"I/O model grid, this job: {name}")


def power_of_two_ticks(count, cell_px, label_px):
    """Ticks 1, 2, 4 ... 2^(count - 1) at cells 0 .. count - 1, every so many cells that labels
    label_px long never overlap on cells cell_px apart; the last cell always labelled."""
    step = max(1, math.ceil(label_px / cell_px))
    return [(e, f"{2 ** e}") for e in range(count) if (count - 1 - e) % step == 0]


def _shade(share):
    """The colour of a measured cell running at `share` of the fastest."""
    red, green, blue = (SLOWEST_MEASURED + (FASTEST_MEASURED - SLOWEST_MEASURED) * min(max(share, 0.0), 1.0)).round()
    return f"#{int(red):02x}{int(green):02x}{int(blue):02x}"


def _rate_label(mib_per_s):
    return f"{mib_per_s:.0f}" if mib_per_s >= 10 else f"{mib_per_s:.2g}"
