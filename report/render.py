"""The HTML report of an assessment: plots drawn from the assessment's data (svg.py), then the
template (templates/report.html.j2). One self-contained page: plots are inline SVG, styles
inline, no script and no external resource; its size does not grow with the number of ops (the
assessment carries a bounded sample and binned series)."""
import os

import markupsafe
import numpy as np

from ioassess.html import write_page

from . import svg
from .assess import ROW_CLASSES

CLASS_COLOURS = {"memcpy": "#2ca02c", "cached": "#1f77b4", "uncached": "#ff7f0e", "slow": "#d62728",
                 "not modelled": "#7f7f7f", "counters (estimate)": "#9467bd"}
TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "templates")


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
    groups = [(f"{cls} ({int(np.sum(classes == cls))})", CLASS_COLOURS[cls], size[classes == cls],
               duration[classes == cls]) for cls in ROW_CLASSES if np.any(classes == cls)]
    model = assessment["model_lines"]
    lines = []
    for name, line in model["lines"].get(direction, {}).items():
        cls, layout = name.split()
        if layout == "rnd":
            lines.append((f"{cls} bound", CLASS_COLOURS[cls], False, model["size"], line["bound_s"]))
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
        [(cls, CLASS_COLOURS[cls], values) for cls, values in series["seconds"].items()],
        "I/O time per interval by class"))


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
