"""`ioassess probe report`: the slowdown of every target over a window (the timelines of the
paper's figures 3, 5 and 6) as plain data (JSON) and as one self-contained HTML page in the job
report's style (inline SVG, no script, no external resource)."""
import datetime
import json
import math
import os
import re

from ...files import replace_atomically
from ...html import write_page
from ...report import render
from ...units import seconds_text
from .slowdown import KINDS, SLOW_FACTOR, probe_slowdown, slow_spans

TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "templates")
RELATIVE = re.compile(r"-?(\d+(?:\.\d*)?)(s|m|h|d)")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


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
    if re.fullmatch(r"\d+(\.\d*)?", text) and math.isfinite(float(text)):
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
    plots = {target["target"]: [plot for plot in (render.probe_slowdown_plot(
        target, kind, target["since"], 3600, f"hours since {time_text(target['since'])}") for kind in KINDS) if plot]
             for target in data["targets"]}
    write_page(path, TEMPLATE_DIR, "probe.html.j2", {"d": data, "plots": plots, "time": time_text,
                                                      "kinds": KINDS},
               {"seconds": seconds_text, "factor": factor_text}, 0o644)


def time_text(seconds):
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S")


def factor_text(value):
    return "–" if value is None else f"{value:.3g}x"
