"""The training report: one HTML page with the paper's Fig. 4/5-style plots (durations against
access size with the bound and typical lines) and its Table 3 (line parameters and errors).
Data first (report_data), then the template (templates/training.html.j2). Plots are inline SVG
drawn as the job report's are (report/svg.py), a bounded sample of points per size."""
import os

import markupsafe
import numpy as np

from ..html import write_page
from ..models.causes import FLUSHED, JOINT_BYTES, LINE_OPS
from ..report import svg

MAX_POINTS_PER_SIZE = 400      # plotted observations per size; the rest are summarised by the lines
LAYOUT_COLOURS = {"off0": "#1f77b4", "rnd": "#d62728", "off0-unaligned": "#2ca02c", "rnd-unaligned": "#ff7f0e"}
JOINT_COLOUR = "#999999"
ERROR_COLUMNS = ("abs_err_s", "rel_err_pct", "outlier_pct_experiment", "outlier_pct_model")


def cell_plot(op, cls, measurements, model):
    """Durations against size for one op and class, both memory layouts, with their lines."""
    rng = np.random.default_rng(0)
    groups, lines = [], []
    for layout, colour in LAYOUT_COLOURS.items():
        by_size = measurements.get((op, cls, layout))
        if not by_size:
            continue
        sizes, seconds = [], []
        for size, durations in by_size.items():
            shown = durations if len(durations) <= MAX_POINTS_PER_SIZE else rng.choice(
                durations, MAX_POINTS_PER_SIZE, replace=False)
            sizes.append(size * np.exp(rng.uniform(-0.08, 0.08, len(shown))))
            seconds.append(np.asarray(shown, float))
        groups.append((layout, colour, np.concatenate(sizes), np.concatenate(seconds)))
        line = model.lines.get((op, cls, layout))
        if line:
            line_sizes = np.geomspace(1, max(by_size), 200)
            lines.append((f"{layout} bound", colour, False, line_sizes, line.bound.predict(line_sizes)))
            if line.typical is not None:
                lines.append((f"{layout} typical", colour, True, line_sizes, line.typical.predict(line_sizes)))
    # the joint of the two segments, drawn across the whole height (the plot clips it)
    lines.append((f"{JOINT_BYTES} B joint", JOINT_COLOUR, False, [JOINT_BYTES, JOINT_BYTES], [1e-12, 1e6]))
    x_label = "bytes written before the fsync" if cls == FLUSHED else "access size"
    return markupsafe.Markup(svg.scatter_plot(f"{cls} {op}", groups, lines,
                                              f"{cls} {op}: durations against {x_label}", x_label))


def table_rows(model):
    """Table 3 of the paper: one row per class, op, segment and layout."""
    rows = []
    for cls in LINE_OPS:
        for op in LINE_OPS[cls]:
            for segment, label in (("small", "≤ 4K"), ("large", "> 4K")):
                for layout in LAYOUT_COLOURS:
                    line = model.lines.get((op, cls, layout))
                    if line is None:
                        continue
                    bound = line.bound
                    intercept, slope = ((bound.small_intercept_s, bound.small_slope_s_per_byte) if segment == "small"
                                        else (bound.large_intercept_s, bound.large_slope_s_per_byte))
                    rows.append({"case": f"{cls} {op[0].upper()} {label} {layout}", "intercept": intercept,
                                 "slope": slope, **dict.fromkeys(ERROR_COLUMNS),
                                 **(line.errors.get(segment) or {}), "note": line.note})
    return rows


def report_data(model, measurements):
    plots = [{"op": op, "cls": cls, "svg": cell_plot(op, cls, measurements, model)}
             for cls in LINE_OPS for op in LINE_OPS[cls]
             if any((op, cls, layout) in measurements for layout in LAYOUT_COLOURS)]
    return {"model": model, "rows": table_rows(model), "plots": plots, "max_points": MAX_POINTS_PER_SIZE,
            "observations": sum(len(d) for cell in measurements.values() for d in cell.values())}


def write_training_report(path, model, measurements):
    # Readable by the site's users, as the model file it describes: it holds no job's data.
    write_page(path, os.path.join(os.path.dirname(__file__), "templates"), "training.html.j2",
               report_data(model, measurements), mode=0o644)
