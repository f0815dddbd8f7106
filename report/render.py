"""The HTML report of an assessment: plots drawn from the assessment's data (svg.py), then the
template (templates/report.html.j2). One self-contained page: plots are inline SVG, styles
inline, no script and no external resource; its size does not grow with the number of ops (the
assessment carries a bounded sample and binned series)."""
import math
import os

import markupsafe
import numpy as np

from ioassess.html import write_page
from ioassess.models.causes import CLASSES
from ioassess.units import (bytes_text, clock_text, count_text, interval_text, plural, rate_text, seconds_text,
                            share_text)

from . import svg
from .classify import ROW_CLASSES

# What the page calls each class (the JSON keeps the codes): what it means for the op.
CLASS_LABELS = {"memcpy": "memory speed", "cached": "page cache", "uncached": "storage", "slow": "slower than storage",
                "stall": "stall (cached, as slow as storage)", "allocation": "allocation (new pages)",
                "not modelled": "not modelled", "counters (estimate)": "counters (estimate)"}
CLASS_COLOURS = {"memcpy": "#2ca02c", "cached": "#1f77b4", "uncached": "#ff7f0e", "slow": "#d62728",
                 "stall": "#e377c2", "allocation": "#bcbd22", "not modelled": "#7f7f7f",
                 "counters (estimate)": "#9467bd"}
TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "templates")


def scatter_legend(assessment, direction, cls, drawn):
    """A class's legend entry: its ops of the direction as the classes table counts them, and how
    many of them are drawn when the plot shows a sample."""
    total = sum(row["ops"] for row in assessment["classes"] if row["class"] == cls and row["direction"] == direction)
    return f"{CLASS_LABELS[cls]} ({total}" + (f", {drawn} drawn)" if drawn < total else ")")


def scatter_plot(assessment, direction):
    """Durations against access size of the sampled ops of one direction, coloured by class,
    with the model's bound lines (solid) and the cached typical line (dashed), rnd layout."""
    sample = assessment["scatter"]
    chosen = np.array([d == direction for d in sample["direction"]], bool)
    if not chosen.any():
        return None
    size = np.array(sample["size"], float)[chosen]
    duration = np.array(sample["duration_s"], float)[chosen]
    classes = np.array(sample["class"])[chosen]
    groups = [(scatter_legend(assessment, direction, cls, int(np.sum(classes == cls))), CLASS_COLOURS[cls],
               size[classes == cls], duration[classes == cls]) for cls in ROW_CLASSES if np.any(classes == cls)]
    model = assessment["model_lines"]
    lines = []
    for name, line in model["lines"].get(direction, {}).items():
        cls, layout = name.split()
        if layout == "rnd" and cls in CLASSES:  # the classes' lines; the appended line is not a class
            lines.append((f"{CLASS_LABELS[cls]} bound", CLASS_COLOURS[cls], False, model["size"], line["bound_s"]))
            if cls == "cached" and line["typical_s"]:
                lines.append(("if cached", CLASS_COLOURS[cls], True, model["size"], line["typical_s"]))
    return markupsafe.Markup(svg.scatter_plot(f"{direction}s", groups, lines,
                                              f"durations of {direction}s against access size, by class"))


def timeline_plot(assessment):
    """I/O seconds per time bin, stacked by class."""
    series = assessment["timeline"]
    if not series["seconds"]:
        return None
    return markupsafe.Markup(svg.stacked_bars(
        "I/O time by class", series["start_s"], series["bin_s"],
        [(CLASS_LABELS[cls], CLASS_COLOURS[cls], values) for cls, values in series["seconds"].items()],
        "I/O time per interval by class"))


KIND_COLOURS = {"read": "#1f77b4", "write": "#d62728"}


def slowdown_plot(assessment):
    """Median (solid) and p99 (dashed) slowdown per interval and op kind."""
    slowdown = assessment["slowdown"]
    if not slowdown["interval_count"] or not slowdown["kinds"]:
        return None
    starts = slowdown["interval_starts_seconds"]
    series = []
    for kind, values in slowdown["kinds"].items():
        colour = KIND_COLOURS.get(kind, "#7f7f7f")
        series.append((f"{kind} median", colour, False, starts, values["median"]))
        series.append((f"{kind} p99", colour, True, starts, values["p99"]))
    plot = svg.line_plot("slowdown: duration / cached typical duration", "time since job start (s)",
                         "slowdown", series, "slowdown per interval by op kind")
    return markupsafe.Markup(plot) if plot else None


PROBE_KIND_COLOURS = {"read": "#1f77b4", "write": "#d62728", "metadata": "#2ca02c"}


def probe_slowdown_plot(target, kind, offset_s, unit_s, x_label):
    """The file-system probe's slowdown of one op kind for one target (a probe_slowdown of
    ioassess/site/probe/slowdown.py): the median (solid), p90 and p99 (dashed) per interval, against
    the time since offset_s in units of unit_s seconds."""
    entry = target["kinds"][kind]
    if not any(entry["count"]):
        return None
    xs = [(start - offset_s) / unit_s for start in target["interval_starts"]]
    series = [(f"{kind} {name}", PROBE_KIND_COLOURS[kind] if name == "median" else "#888", name != "median", xs,
               entry[name]) for name in ("median", "p90", "p99")]
    plot = svg.line_plot(f"{target['target']}: {kind} slowdown (observed / normal)", x_label, "slowdown", series,
                         f"file-system probe: {kind} slowdown per {seconds_text(target['interval_seconds'])} interval")
    return markupsafe.Markup(plot) if plot else None


def file_system_plots(assessment):
    """The probe's slowdown per target and kind over the job's window, in seconds since its start."""
    section = assessment["file_system"]
    return [plot for target in section["targets"] for kind in ("read", "write", "metadata")
            for plot in [probe_slowdown_plot(target, kind, section["job_start"], 1, "time since job start (s)")]
            if plot]


def order_statistics_undrawn(assessment):
    """(kind, why) of the op kinds with tail statistics but no curve in the order-statistics
    plot: no order statistics (too few points, all equal, ...), or no finite ratio to draw (a
    zero median, or a tail whose expected maximum is infinite)."""
    undrawn = []
    for kind, tail in assessment["tails"].items():
        order = tail.get("order_statistics")
        if not order:
            undrawn.append((kind, tail["status"]))
        elif not any(value is not None for value in order["ratio_to_median"]):
            undrawn.append((kind, "its median is 0" if not order["median_seconds"] else
                            "its fitted tail is so heavy that the expected maximum is not finite"))
    return undrawn


def order_statistics_plot(assessment):
    """E[max of n] over the median, per op kind: how the tail stretches a request striped
    over n servers."""
    series = []
    for kind, tail in assessment["tails"].items():
        order = tail.get("order_statistics")
        if order:
            series.append((kind, KIND_COLOURS.get(kind, "#7f7f7f"), False, order["server_counts"],
                           order["ratio_to_median"]))
    plot = svg.line_plot("expected maximum of n ops over their median", "n (servers or stripes)",
                         "E[max] / median", series, "expected maximum over median against n", log_x=True) \
        if series else None
    return markupsafe.Markup(plot) if plot else None


def io_model_plot(assessment):
    """The job's cell on Sisneros' grid among the site's measured cells; None without them."""
    cell = assessment["io_model"]
    site = assessment["site_grid"]
    if not cell["processes_doing_io"] or not site or not site.get("cells"):
        return None     # without the site's measured cells the grid would be grey cells around the job's
    measured = [(m["processes"], m["processes_per_file"], m["mib_per_s"],
                 f"{m['name']}, P = {m['processes']}, k = {m['processes_per_file']}: {rate_text(m['mib_per_s'])} "
                 f"(fastest of {count_text(m['models'], 'model')} measured)")
                for m in site["cells"]]
    return markupsafe.Markup(svg.io_model_grid(cell["processes_doing_io"], cell["processes_per_file"], cell["name"],
                                               measured))


PER_PROCESS_COLOURS = {"lost": "#d62728", "not lost": "#1f77b4", "most lost": "#67000d", "slowest": "#08306b"}


def per_process_plot(assessment):
    """I/O time per rank (or process), the part of it lost below; in bins of consecutive ranks
    when there are many, with each bin's maximum marked."""
    view = assessment["per_process"]
    if not view or not view["plot"]:
        return None
    plot, unit = view["plot"], view["unit"]
    lost = np.array(plot["lost_s_mean"])
    series = [("time lost", PER_PROCESS_COLOURS["lost"], lost),
              ("I/O time not lost", PER_PROCESS_COLOURS["not lost"], np.maximum(np.array(plot["io_s_mean"]) - lost, 0))]
    binned = plot["units_per_bin"] > 1
    markers = [(f"slowest {unit} of a bin", PER_PROCESS_COLOURS["slowest"], plot["io_s_max"]),
               ("most lost in a bin", PER_PROCESS_COLOURS["most lost"], plot["lost_s_max"])] if binned else []
    title = f"I/O time per {unit}" + (f" (mean of {plot['units_per_bin']} {plural(unit)} a bar)" if binned else "")
    x_label = "rank" if unit == "rank" else "processes with I/O, by pid"
    return markupsafe.Markup(svg.stacked_bars(title, plot["start"], plot["units_per_bin"], series,
                                              f"I/O time and time lost per {unit}", x_label=x_label,
                                              y_label="seconds", x_ticks=bar_ticks(plot), markers=markers))


def bar_ticks(plot, most=10):
    """At most about `most` ticks, under the middle of every so many bars, each naming its
    bar's first unit, or its range of units."""
    per_bin, starts = plot["units_per_bin"], plot["start"]
    every = max(1, math.ceil(len(starts) / most))
    last = [min(start + per_bin, plot["units"]) - 1 for start in starts[::every]]
    return [(start + per_bin / 2, f"{start}" if start == end else f"{start}–{end}")
            for start, end in zip(starts[::every], last)]


def provenance_rows(provenance):
    """(field, text) rows of a model's provenance; nested objects as `key: value` pairs."""
    def text(value):
        if isinstance(value, dict):
            return "; ".join(f"{key}: {text(item)}" for key, item in value.items())
        if isinstance(value, (list, tuple)):
            return ", ".join(text(item) for item in value)
        return str(value)
    return [(key, text(value)) for key, value in provenance.items()]


LAYER_NAMES = {"mpiio": "MPI-IO", "posix": "POSIX", "stdio": "STDIO"}   # upper layer first


def page_data(assessment):
    return {"a": assessment, "provenance": provenance_rows(assessment["model"]["provenance"]),
            "layer_columns": [layer for layer in LAYER_NAMES if any(row[layer] for row in assessment["layers"])],
            "layer_names": LAYER_NAMES, "plural": plural,
            "plots": {"scatter": [p for p in (scatter_plot(assessment, d) for d in ("read", "write")) if p],
                      "timeline": timeline_plot(assessment), "slowdown": slowdown_plot(assessment),
                      "order_statistics": order_statistics_plot(assessment),
                      "order_statistics_undrawn": order_statistics_undrawn(assessment),
                      "io_model": io_model_plot(assessment), "per_process": per_process_plot(assessment),
                      "file_system": file_system_plots(assessment)}}


def finding_number(key, value):
    """One number behind a finding as the page shows it: "uncached ops: 4076", "lost: 1.23 s",
    "lost share of runtime: 12.0 %", "small files bytes: 1.5 MiB"."""
    if key.endswith("_s") and isinstance(value, (int, float)):
        return f"{key[:-2].replace('_', ' ')}: {seconds_text(value)}"
    name = key.replace("_", " ")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return f"{name}: {value}"
    if "share" in key:
        return f"{name}: {share_text(value)}"
    if key.endswith("bytes"):
        return f"{name}: {bytes_text(value)}"
    return f"{name}: {value:.4g}" if isinstance(value, float) else f"{name}: {value}"


FILTERS = {"seconds": seconds_text, "bytes": bytes_text, "share": share_text, "rate": rate_text, "clock": clock_text,
           "count": count_text, "class_label": lambda cls: CLASS_LABELS.get(cls, cls)}


def write_report(path, assessment, mode=0o600, group=-1):
    """The report page at path, with mode and group as for ioassess.files.replace_atomically."""
    data = page_data(assessment)
    data["interval"] = interval_text
    data["finding_number"] = finding_number
    write_page(path, TEMPLATE_DIR, "report.html.j2", data, FILTERS, mode, group)
