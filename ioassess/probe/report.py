"""`ioassess probe report`: the slowdown of every target over a window (the timelines of the
paper's figures 3, 5 and 6) as plain data (JSON) and as one self-contained HTML page in the job
report's style (inline SVG, no script, no external resource)."""
import datetime
import json
import os
import re

import markupsafe

from ..files import replace_atomically
from ..html import write_page
from ..report import render, svg
from .slowdown import KINDS, probe_slowdown, slow_spans

SLOW_FACTOR = 2.0     # an interval whose median slowdown is this or more is named slow
TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "templates")
RELATIVE = re.compile(r"-?(\d+(?:\.\d*)?)(s|m|h|d)")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
QUANTILE_STYLE = (("median", False), ("p90", True), ("p99", True))
KIND_COLOURS = {"read": "#1f77b4", "write": "#d62728", "metadata": "#2ca02c"}


def parse_time(text, now):
    """Seconds since the epoch from `now`, `90m`, `2h`, `30d` (before now; `-2h` alike), seconds
    since the epoch, or ISO 8601 (`2026-11-23T14:00`, local time unless it names its zone). ValueError
    with the reason otherwise."""
    text = text.strip()
    relative = RELATIVE.fullmatch(text)
    if text == "now":
        return now
    if relative:
        return now - float(relative[1]) * UNIT_SECONDS[relative[2]]
    if re.fullmatch(r"\d+(\.\d*)?", text):
        return float(text)
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ValueError(f"not a time: {text!r} (now, 2h, 30d: before now; seconds since the epoch or ISO 8601 such as "
                         "2026-11-23T14:00)") from None


def probe_report_data(store, since_s, until_s, width_s=None, normal_days=30.0, names=None):
    """{"since", "until", "store", "slow_factor", "targets": [probe_slowdown + "slow_spans"]}."""
    targets = []
    for name in names or store.targets():
        slowdown = probe_slowdown(store, name, since_s, until_s, width_s, normal_days)
        slowdown["slow_spans"] = slow_spans(slowdown, SLOW_FACTOR)
        targets.append(slowdown)
    return {"since": since_s, "until": until_s, "store": store.path, "slow_factor": SLOW_FACTOR,
            "targets": targets}


def write_json(path, data):
    replace_atomically(path, json.dumps(data, indent=1, allow_nan=False) + "\n", 0o644)


def write_html(path, data):
    plots = {target["target"]: [plot for plot in (slowdown_plot(target, kind) for kind in KINDS) if plot]
             for target in data["targets"]}
    write_page(path, TEMPLATE_DIR, "probe.html.j2", {"d": data, "plots": plots, "time": time_text,
                                                      "kinds": KINDS},
               {"seconds": render.seconds_text, "factor": factor_text}, 0o644)


def slowdown_plot(target, kind, offset_s=None, title=None):
    """One kind's median (solid), p90 and p99 (dashed) slowdown per interval, against hours
    since offset_s (default: the window's start)."""
    offset_s = target["since"] if offset_s is None else offset_s
    entry = target["kinds"][kind]
    if not any(entry["count"]):
        return None
    hours = [(start - offset_s) / 3600 for start in target["interval_starts"]]
    colour = KIND_COLOURS[kind]
    series = [(f"{kind} {name}", colour if name == "median" else "#888", dashed, hours, entry[name])
              for name, dashed in QUANTILE_STYLE]
    plot = svg.line_plot(title or f"{target['target']}: {kind} slowdown (observed / normal)",
                         "hours since " + time_text(offset_s), "slowdown", series,
                         f"{kind} slowdown per {render.seconds_text(target['interval_seconds'])} interval")
    return markupsafe.Markup(plot) if plot else None


def time_text(seconds):
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S")


def factor_text(value):
    return "–" if value is None else f"{value:.3g}x"
