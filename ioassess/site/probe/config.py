"""The probe's settings (docs/probe.md): built in, then a config file, then the command line.

A config file has one [probe] section of store settings and one [target NAME] section per file
system to probe:

    [probe]
    db = /var/lib/ioassess/probe.sqlite
    interval = 1s

    [target scratch]
    dir = /lustre/scratch/ioassess-probe
    data_size = 1G
    pool_files = 10000

Anything wrong in it is a ProbeConfigError: one line naming the file and the problem.
"""
import argparse
import dataclasses
import os
import re

from ...files import read_settings_file
from ..iomodels import parse_size

DEFAULT_DB = "/var/lib/ioassess/probe.sqlite"
DEFAULT_DATA_SIZE = 1 << 30
DEFAULT_POOL_FILES = 10_000
DEFAULT_METRICS_ADDRESS = "127.0.0.1"   # the exporter's: 0.0.0.0 (or the node's address) for another host
PROBE_SECTION = "probe"
TARGET_SECTION = re.compile(r"target\s+(\S+)")
MIN_DATA_SIZE = 1 << 20       # one 1 MiB block at least
INTERVAL_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}


class ProbeConfigError(Exception):
    """Bad probe settings; str() is the one line printed after `ioassess: `."""


@dataclasses.dataclass(frozen=True)
class Target:
    """One file system to probe: its files go to DIR/ioassess-probe/."""
    name: str
    dir: str
    data_size: int = DEFAULT_DATA_SIZE
    pool_files: int = DEFAULT_POOL_FILES


@dataclasses.dataclass(frozen=True)
class ProbeSettings:
    db: str = DEFAULT_DB
    interval: float = 1.0
    raw_days: float = 30.0
    aggregate_days: float = 365.0
    normal_days: float = 30.0
    metrics_port: int = 0
    metrics_address: str = DEFAULT_METRICS_ADDRESS
    targets: tuple = ()


def parse_interval(text):
    """Seconds from `1`, `1s`, `500ms`, `2m`, `4h`: positive and finite."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(ms|s|m|h|)\s*", str(text))
    seconds = float(match[1]) * INTERVAL_UNITS[match[2]] if match else 0.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"not an interval: {text!r} (e.g. 1s, 500ms, 10m, 4h)")
    return seconds


def _days(text):
    try:
        days = float(text)
    except ValueError:
        days = 0.0
    if not 0 < days < float("inf"):
        raise argparse.ArgumentTypeError(f"not a number of days: {text!r} (more than 0)")
    return days


def _port(text):
    if not str(text).strip().isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {text!r} (0 to 65535; 0: no exporter)")
    return int(text)


def _data_size(text):
    size = parse_size(text)
    if size < MIN_DATA_SIZE:
        raise argparse.ArgumentTypeError(f"data_size {text!r} is below 1 MiB")
    return size


def _pool_files(text):
    if not str(text).strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a number of files: {text!r} (1 or more)")
    return int(text)


PROBE_CONVERTERS = {"db": str, "interval": parse_interval, "raw_days": _days, "aggregate_days": _days,
                    "normal_days": _days, "metrics_port": _port, "metrics_address": str.strip}
TARGET_CONVERTERS = {"dir": str, "data_size": _data_size, "pool_files": _pool_files}


def read_config(path):
    """ProbeSettings from a config file (defaults for what it leaves out); at least one target."""
    try:
        parser = read_settings_file(path)
    except ValueError as error:
        raise ProbeConfigError(str(error)) from None
    values, targets = {}, []
    for section in parser.sections():
        match = TARGET_SECTION.fullmatch(section)
        if section == PROBE_SECTION:
            values = _convert(path, section, parser[section], PROBE_CONVERTERS)
        elif match:
            fields = _convert(path, section, parser[section], TARGET_CONVERTERS)
            if "dir" not in fields:
                raise ProbeConfigError(f"{path}: [{section}] needs dir = DIRECTORY")
            twin = next((target for target in targets
                         if os.path.normpath(target.dir) == os.path.normpath(fields["dir"])), None)
            if twin:   # two probes of one directory take each other's files
                raise ProbeConfigError(f"{path}: [{section}] dir {fields['dir']}: also the dir of [target {twin.name}]")
            targets.append(Target(match[1], **fields))
        else:
            raise ProbeConfigError(f"{path}: unknown section [{section}] (known: [{PROBE_SECTION}], [target NAME])")
    if not targets:
        raise ProbeConfigError(f"{path}: no [target NAME] section: nothing to probe")
    return ProbeSettings(**values, targets=tuple(targets))


def _convert(path, section, items, converters):
    values = {}
    for name, text in items.items():
        if name not in converters:
            raise ProbeConfigError(f"{path}: [{section}]: unknown setting {name!r} (known: {', '.join(converters)})")
        try:
            values[name] = converters[name](text)
        except argparse.ArgumentTypeError as error:
            raise ProbeConfigError(f"{path}: [{section}] {name}: {error}") from None
    return values
