"""The HTML report of an assessment: plots drawn from the assessment's data, then the template
(templates/report.html.j2). One self-contained page: plots are embedded PNG, styles inline, no
script and no external resource; its size does not grow with the number of ops (the
assessment carries a bounded sample and binned series)."""
import os

import numpy as np

from ioassess.html import new_figure, png_data_uri, write_page

from .assess import ROW_CLASSES

CLASS_COLOURS = {"memcpy": "#2ca02c", "cached": "#1f77b4", "uncached": "#ff7f0e", "slow": "#d62728",
                 "not modelled": "#7f7f7f", "counters (estimate)": "#9467bd"}
TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "templates")


def scatter_plot(assessment, direction):
    """Durations against access size of the sampled ops of one direction, coloured by class,
    with the model's bound (solid) and cached typical (dashed) lines."""
    sample = assessment["scatter"]
    chosen = np.array([d == direction for d in sample["direction"]], bool)
    if not chosen.any():
        return None
    size = np.maximum(np.array(sample["size"], float)[chosen], 1)
    duration = np.array(sample["duration_s"], float)[chosen]
    classes = np.array(sample["class"])[chosen]
    figure, axes = new_figure(6.4, 4.0)
    for cls in ROW_CLASSES:
        member = classes == cls
        if member.any():
            axes.scatter(size[member], np.maximum(duration[member], 1e-9), s=4, alpha=0.5,
                         color=CLASS_COLOURS[cls], linewidths=0, label=f"{cls} ({int(member.sum())})")
    lines = assessment["model_lines"]
    for name, line in lines["lines"].get(direction, {}).items():
        cls = name.split()[0]
        if "rnd" in name:
            axes.plot(lines["size"], line["bound_s"], color=CLASS_COLOURS[cls], linewidth=1)
            if cls == "cached" and line["typical_s"]:
                axes.plot(lines["size"], line["typical_s"], color=CLASS_COLOURS[cls], linewidth=1, linestyle="--")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("access size (bytes)")
    axes.set_ylabel("duration (s)")
    axes.set_title(f"{direction}s")
    axes.legend(fontsize="small", markerscale=3)
    return png_data_uri(figure)


def timeline_plot(assessment):
    """I/O seconds per time bin, stacked by class."""
    series = assessment["timeline"]
    if not series["seconds"]:
        return None
    figure, axes = new_figure(9.0, 3.0)
    start = np.array(series["start_s"])
    bottom = np.zeros(len(start))
    for cls, seconds in series["seconds"].items():
        axes.bar(start, seconds, width=series["bin_s"], bottom=bottom, align="edge", color=CLASS_COLOURS[cls],
                 label=cls)
        bottom += np.array(seconds)
    axes.set_xlabel("time since job start (s)")
    axes.set_ylabel("I/O seconds per bin")
    axes.legend(fontsize="small")
    return png_data_uri(figure)


def page_data(assessment):
    return {"a": assessment,
            "plots": {"scatter": [p for p in (scatter_plot(assessment, d) for d in ("read", "write")) if p],
                      "timeline": timeline_plot(assessment)}}


def seconds_text(value):
    """1.23 s, 45.6 ms, 7.8 µs; "–" for None."""
    if value is None:
        return "–"
    magnitude = abs(value)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if magnitude >= scale or unit == "µs":
            return f"{value / scale:.3g} {unit}"


def bytes_text(value):
    """512 B, 3.0 KiB, 1.5 GiB."""
    if value is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024


def share_text(value):
    return "–" if value is None else f"{100 * value:.1f} %"


def interval_text(low, high, unit=seconds_text):
    """One value when both ends agree within 1 %, else "low – high"."""
    if high - low <= 0.01 * max(abs(high), 1e-12):
        return unit(high)
    return f"{unit(low)} – {unit(high)}"


FILTERS = {"seconds": seconds_text, "bytes": bytes_text, "share": share_text}


def write_report(path, assessment):
    data = page_data(assessment)
    data["interval"] = interval_text
    write_page(path, TEMPLATE_DIR, "report.html.j2", data, FILTERS)
