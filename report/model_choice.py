"""Which cause models judge a job: per file system the job's I/O went to, the one whose
provenance fits it (docs/cause-models.md, "Choosing the model").

A file's file system is that of its own evidence (ioassess.inputs.job.with_own_file_systems);
the job's main file system is the one that took most of its I/O time (reads and writes of the
POSIX and STDIO layers, per op and from counters), and its model is the job's model, which also
judges the files of no known file system. Candidates are the model files of the user's, the
site's and the shipped directories (ioassess.models.modelfile.find_models), ranked for each file
system:

  1. a user's or site's model made on a host of the job, for that file system (same device
     number for traces, same mount point for Darshan logs, which have no device numbers), of
     the same type;
  2. a user's or site's model of the same type, made on a host of the same class (its name
     with the digits taken out) or for the same mount point;
  3. a shipped model of the same type (mistral-lustre-2015 for Lustre): shipped models were
     made elsewhere, whatever their host was called;
  4. the shipped default (local-linux) for a local Linux file system type.

Ties go to the earlier directory in the search order, then to the name. With no candidate the
default is used all the same, and the choice says, with a banner, that its file-system type is
not that file system's: a model of one type is never applied to another silently.
"""
import dataclasses
import os
import re

import numpy as np

from ioassess.models.modelfile import DEFAULT_MODEL, ORIGINS, find_models, load_model, model_dirs


# File-system types of local Linux block devices and memory, whose page cache behaves as the
# default model's (trained on ext4); anything else (nfs, lustre, gpfs, ...) is another machine.
LOCAL_TYPES = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "tmpfs", "rootfs", "overlay",
                         "overlayfs"})
# Where no storage is: the files of these file systems say nothing about where the I/O went.
PSEUDO_TYPES = frozenset({"", "proc", "sysfs", "devpts", "devtmpfs", "cgroup", "cgroup2", "debugfs", "pipefs"})
MATCHES = ("host and file system", "host class", "shipped for the type", "local default", "none", "given")


@dataclasses.dataclass(frozen=True)
class FileSystem:
    """A file system the job did I/O on."""
    type: str
    mount: str          # "" if not known (traces before MOUNT slots, Darshan logs without the file's mount)
    device: int         # st_dev; 0 if not known (Darshan logs)
    seconds: float      # the job's I/O time on it
    share: float        # of the I/O time on known file systems
    key: tuple = ()     # file_system_key of its files


def file_system_key(file):
    """What files of one file system share: type and mount point, or device where the mount
    point is not known; None for files of pseudo file systems and of unknown ones."""
    if file.fs_type in PSEUDO_TYPES:
        return None
    return file.fs_type, file.mount_point, 0 if file.mount_point else file.device


def job_file_systems(job):
    """The job's file systems, most I/O time first (then most files): by type and mount point,
    or by device where the mount point is not known. A file system's device is that of its
    files that have one (a path that was never opened or stat'ed has none)."""
    seconds = job.io_seconds_per_file
    groups = {}
    for index, file in enumerate(job.files):
        key = file_system_key(file)
        if key is None:
            continue
        total, files, device = groups.get(key, (0.0, 0, 0))
        groups[key] = (total + seconds[index], files + 1, device or file.device)
    overall = sum(total for total, _, _ in groups.values())
    ordered = sorted(groups.items(), key=lambda item: (-item[1][0], -item[1][1], item[0]))
    return [FileSystem(key[0], key[1], device, total, total / overall if overall > 0 else 1.0 / len(ordered), key)
            for key, (total, _, device) in ordered]


def host_class(host):
    """The host's short name with each run of digits as one #: nodes of one cluster (n0012,
    n0345) share it."""
    return re.sub(r"[0-9]+", "#", host.split(".")[0])


def match_rank(found, file_system, hosts):
    """0-3 (the module doc's ranks 1-4, best first) of a usable model file for the file system,
    or None when it does not fit."""
    provenance = found.model.provenance
    own = provenance["file_system"]
    if found.origin == "shipped":   # made elsewhere, whatever its host was called
        if own["type"] == file_system.type:
            return 2
        return 3 if found.name == DEFAULT_MODEL and file_system.type in LOCAL_TYPES else None
    if own["type"] != file_system.type:
        return None
    if file_system.device:
        same_place = own.get("device_number") == device_number(file_system.device)
    else:
        same_place = bool(file_system.mount) and own["mount"] == file_system.mount
    if provenance["host"] in hosts and same_place:
        return 0
    if host_class(provenance["host"]) in {host_class(host) for host in hosts} or \
            (file_system.mount and own["mount"] == file_system.mount):
        return 1
    return None


def device_number(st_dev):
    return f"{os.major(st_dev)}:{os.minor(st_dev)}"


def choose_model(job, dirs=None):
    """(model, path, choice) for the job, from the model directories (default: model_dirs()):
    the model of its main file system; choice is the assessment's "choice" (docs/assessment.md),
    with the model of each file system. Raises ModelFileError when the shipped default is
    needed and cannot be read."""
    file_systems = job_file_systems(job)
    hosts = sorted({process.hostname for process in job.processes if process.hostname})
    found = find_models(dirs)
    usable = [entry for entry in found if entry.model is not None]
    not_used = [f"{entry.path}: {entry.problem}" for entry in found if entry.model is None]
    default = []    # the shipped default, loaded once if any file system needs it

    def best(file_system):
        """(model, path, match, reason) for a file system (None: the job's file systems are not known)."""
        ranked = []
        for index, entry in enumerate(usable if file_system else ()):
            rank = match_rank(entry, file_system, hosts)
            if rank is not None:
                ranked.append((rank, ORIGINS.index(entry.origin), entry.name, index))
        if ranked:
            rank, _, _, index = min(ranked)
            model, path, match = usable[index].model, usable[index].path, MATCHES[rank]
        else:
            if not default:
                shipped = next(directory for origin, directory in dirs or model_dirs() if origin == "shipped")
                path = os.path.join(shipped, DEFAULT_MODEL + ".json")
                default.append((load_model(path), path))
            (model, path), match = default[0], "none"
        return model, path, match, _reason(match, model, file_system, hosts)

    chosen = [best(file_system) for file_system in file_systems] or [best(None)]
    model, path, match, reason = chosen[0]
    choice = {"match": match, "reason": reason, "not_used": not_used}
    return model, path, {**choice, **_file_system_facts(file_systems, chosen)}


def given_model_choice(job, model, path):
    """The choice of a model given with --model (or the epilog's `model` setting): it judges
    every file system."""
    reason = f"given: {path}"
    choice = {"match": "given", "reason": reason, "not_used": []}
    file_systems = job_file_systems(job)
    return {**choice, **_file_system_facts(file_systems, [(model, path, "given", reason)] * len(file_systems))}


def file_models(job, model, path, choice):
    """(models, index into models per file of Job.files): the models that judge the job's
    files, per file system as the choice says (choose_model); models[0] is the job's model
    (path), which also judges the files of no known file system. A model that judges a file
    system of another type (match "none") puts the job's own cached lines first there
    (CauseModel.own_first). ([model], all 0) without a choice. Raises ModelFileError when a
    model of the choice cannot be read any more."""
    of_file = np.zeros(len(job.files), np.int64)
    if not choice or not choice["file_system"]:
        return [model], of_file
    own_first = choice["file_system"]["match"] == "none"
    models, sources = [dataclasses.replace(model, own_first=own_first)], [(path, own_first)]
    index_of_key = {}
    for file_system, facts in zip(job_file_systems(job), [choice["file_system"], *choice["other_file_systems"]]):
        source = (facts["source"], facts["match"] == "none")
        if source not in sources:
            models.append(dataclasses.replace(load_model(facts["source"]), own_first=source[1]))
            sources.append(source)
        index_of_key[file_system.key] = sources.index(source)
    for position, file in enumerate(job.files):
        of_file[position] = index_of_key.get(file_system_key(file), 0)
    return models, of_file


def _file_system_facts(file_systems, chosen):
    """The job's main file system, the others, each with the model that judges it, and the
    banner when a model's type is not that of the file systems it judges."""
    banner = None
    wrong = [(file_system, model) for file_system, (model, *_) in zip(file_systems, chosen)
             if model.provenance["file_system"]["type"] != file_system.type]
    if wrong:
        models = list(dict.fromkeys(model.name for _, model in wrong))
        sentences = []
        for name in models:
            own_type = next(model.provenance["file_system"]["type"] for _, model in wrong if model.name == name)
            places = [f"{_share_text(file_system.share)} of this job's I/O time went to {_where(file_system)}"
                      for file_system, model in wrong if model.name == name]
            whose = "that file system's" if len(places) == 1 else "theirs"
            sentences.append(f"The cause model {name} was made for {own_type}, but {' and '.join(places)}: its "
                             f"classes and time lost are not {whose}.")
        which = "A model of it" if len(wrong) == 1 else "Models of them"
        own = " Where the kernel found enough of a size's reads or writes there cached, their own times are " \
              "the time if cached of that size (the job's own cached lines), slower ones are storage's." \
            if any(match == "none" for _, (_, _, match, _) in zip(file_systems, chosen)) else ""
        banner = " ".join(sentences) + own + f" {which}: `ioassess calibrate` there (for the site: " \
                                             "`ioassess calibrate --site`)."
    facts = [_file_system_json(file_system, *entry) for file_system, entry in zip(file_systems, chosen)]
    return {"file_system": facts[0] if facts else None, "other_file_systems": facts[1:], "banner": banner}


def _file_system_json(file_system, model, path, match, reason):
    return {"type": file_system.type, "mount": file_system.mount or None,
            "device_number": device_number(file_system.device) if file_system.device else None,
            "seconds": file_system.seconds, "share": file_system.share,
            "model": model.name, "source": path, "match": match, "reason": reason}


def _share_text(share):
    return "less than 1%" if 0 < share < 0.005 else f"{share:.0%}"


def _where(file_system):
    return file_system.type + (f" at {file_system.mount}" if file_system.mount else "")


def _reason(match, model, main, hosts):
    provenance = model.provenance
    own = provenance["file_system"]
    made = f"{provenance['source']} on {provenance['host']}"
    when = f"for {own['type']} at {own['mount']} on {provenance['date']}"
    where_run = f"on {', '.join(hosts)}" if hosts else "where the job ran (its hosts are not known)"
    if match == "host and file system":
        return f"{made}, where the job ran, {when}"
    if match == "host class":
        why = [reason for reason, holds in (
            ("a host like the job's", host_class(provenance["host"]) in {host_class(host) for host in hosts}),
            ("the same mount point", bool(main.mount) and own["mount"] == main.mount)) if holds]
        return f"{made} ({', '.join(why)}), {when}"
    if main is None:
        return (f"the file systems of the job's I/O are not known: the shipped default {model.name} "
                f"({own['type']} on {provenance['host']}, {provenance['date']}) is used")
    another = "its times are another machine's (`ioassess calibrate` makes a model of this one)"
    shipped = f"{model.name} ({own['type']} on {provenance['host']}, {provenance['date']}; {provenance['source']})"
    if match == "shipped for the type":
        return f"no model for {main.type} made {where_run}: the shipped model {shipped} is used; {another}"
    if match == "local default":
        return (f"no model for {main.type} made {where_run}: the shipped default {shipped} is used for this local "
                f"file system; {another}")
    return f"no model for {main.type}: the shipped default {shipped} is used, but it is not a model of {main.type}"
