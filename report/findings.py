"""Findings: what to do about the time lost, each with the seconds at stake (docs/assessment.md
says why each threshold)."""
import collections

from ioassess.inputs.job import META, STDIO, SYNC

from .access_patterns import IMBALANCE_STRAGGLERS
from .classify import ALLOCATION, CLASS_CODES, STALL
from .ledger import io_rows
from .metadata import METADATA_RANK_S, SMALL_FILE_BYTES
from .stakes import LEVELS, WALL_CLOCK_HOW, acting, in_wall_clock, level_by_stake, with_stake
from .storage_targets import SLOW_TARGET_FILES_NAMED, excess_on_slow_targets

# Recommendation thresholds (docs/assessment.md says why).
LOST_SHARE_WORTH_A_LOOK = 0.05      # of the runtime
METADATA_MIN_S = 1.0          # metadata time below this is not worth a finding, whatever its share
MANY_SMALL_FILES = 100        # small files (report/metadata.py) worth a finding
MISSING_PATH_CALLS = 10       # lookups of missing paths worth a finding
STDIO_BYTES_SHARE = 0.1       # Drishti's interface_stdio threshold (S01): stdio's share of all bytes moved
# Causes the kernel's samples tell apart from storage: (class, title, text).
NOT_STORAGE_FINDINGS = (
    (STALL, "Stalls, not storage",
     "These ops found their pages in the page cache (the kernel said so, or said so of every sampled op of "
     "their file), yet took as long as storage I/O: the process waited for a CPU (more busy threads than "
     "cores), was preempted, or took page faults. The file system is not the cause: fewer processes or threads "
     "per core, or pinning them, is."),
    (ALLOCATION, "Writes waited for new memory, not storage",
     "These writes went into new pages (past the end of the file, or whole pages of an uncached file) and took "
     "as long as storage I/O: the kernel was finding memory for them (on a virtual machine, memory the host "
     "hands over lazily). Reusing or preallocating files (fallocate), or memory already in use, avoids it; "
     "faster storage would not."),
)


def finding(title, text, at_stake_s, *, code=None, level="warn", files=(), ranks=(), at_stake_how=None, **numbers):
    """A finding: its title, what it means and what to do, the seconds at stake (the time of the
    ops it is about that a fix could save, at most; None when it is not about time), Drishti's
    code of the same evidence (None where Drishti has none), its level (LEVELS), the files and
    ranks behind it, how the seconds at stake were computed, and the numbers that triggered it."""
    return {"title": title, "text": text, "at_stake_s": at_stake_s, "rank_seconds": None, "code": code,
            "level": level, "files": list(files), "ranks": list(ranks), "at_stake_how": at_stake_how,
            "numbers": numbers}


def by_seconds_at_stake(found):
    """The findings to act on (levels high and warn), most seconds at stake first, those not
    about time after them; then facts (info) and what is good (ok). Stable."""
    def key(f):
        at_stake = -f["at_stake_s"] if f["at_stake_s"] is not None else float("inf")
        return LEVELS.index(f["level"]) >= LEVELS.index("info"), at_stake
    return sorted(found, key=key)


def recommendations(a, seconds):
    """Findings with the numbers that triggered them, most wall-clock seconds at stake first
    (report/stakes.py; seconds: its JobSeconds of the job); each {"title", "text", "at_stake_s",
    "rank_seconds", "level", "numbers", ...}. A level follows the stake (level_by_stake), and the
    verdict that the time lost is small is given only beside no high finding."""
    found = []
    head = a["headline"]
    lost_mid = (head["lost_low_s"] + head["lost_high_s"]) / 2
    by_class = collections.defaultdict(lambda: {"ops": 0, "seconds": 0.0, "lost": 0.0, "slowness": 0.0})
    for row in a["classes"]:
        entry = by_class[row["class"]]
        entry["ops"] += row["ops"]
        entry["seconds"] += row["seconds"]
        entry["lost"] += row["lost_high_s"]
        entry["slowness"] += row["slowness_s"]
    uncached = by_class["uncached"]
    if uncached["lost"] > 0 and lost_mid > 0 and uncached["lost"] >= 0.5 * lost_mid:
        found.append(lost_in(seconds, "uncached", finding(
            "Most lost time is uncached I/O",
            "Reads went to the storage device instead of the page cache; writes waited for the device (partial pages "
            "of uncached files are read first) or for new page-cache memory. Larger, aligned, sequential requests, "
            "reading data once, or a staging copy in fast storage reduce this.", None,
            uncached_ops=uncached["ops"], uncached_s=uncached["seconds"], lost_s=uncached["lost"])))
    slow = by_class["slow"]
    if slow["ops"]:
        found.append(lost_in(seconds, "slow", finding(
            "Some ops were slower than uncached I/O",
            "These ops took longer than the model's slowest explained duration: contention on the file system or the "
            "node, or a cause the model does not know.", None,
            slow_ops=slow["ops"], slow_s=slow["seconds"], lost_s=slow["lost"])))
    for cls, title, text in NOT_STORAGE_FINDINGS:
        entry = by_class[cls]
        if entry["slowness"] > 0 and entry["slowness"] >= LOST_SHARE_WORTH_A_LOOK * (lost_mid + head["slowness_s"]):
            numbers = {f"{cls}_ops": entry["ops"], f"{cls}_s": entry["seconds"], "slowness_s": entry["slowness"]}
            found.append(lost_in(seconds, cls, finding(title, text, None, **numbers), "slowness_s"))
    found += sync_findings(a["flushes"], head["io_s"], seconds)
    found += stdio_findings(a["layers"], seconds, a["unassessed_modules"])
    if a["tier"] == "counters":
        found.append(finding("Estimates from counters only",
                             "This log has no per-op timings: lost time is an interval estimated from the "
                             "access-size histogram. Run the job under ioassess (or with Darshan's DXT "
                             "enabled, DXT_ENABLE_IO_TRACE=1) for a per-op assessment.", None, level="info",
                             lost_low_s=head["lost_low_s"], lost_high_s=head["lost_high_s"]))
    found += metadata_findings(a.get("metadata"), head["io_s"], seconds)
    found += straggler_findings(a["per_process"], head["runtime_s"])
    found += slow_target_findings(a["storage_targets"], seconds)
    found += [pattern_finding(p) for p in a["access_patterns"]]
    found = [dict(f, level=level_by_stake(f, head["runtime_s"])) for f in found]
    found += verdict(head, found)
    return by_seconds_at_stake(found)


def verdict(head, found):
    """"I/O time lost is small" when the slowest process lost less than LOST_SHARE_WORTH_A_LOOK of
    the run time and no finding is high: never beside a finding that says otherwise."""
    share = head["lost_share_of_runtime"]
    if share is None or share >= LOST_SHARE_WORTH_A_LOOK or any(f["level"] == "high" for f in found):
        return []
    return [finding("I/O time lost is small",
                    "Compared with cached I/O the job lost little time: tuning its I/O would gain little" +
                    (", though the findings below are worth a look." if acting(found) else "."),
                    None, level="ok", lost_s=(head["lost_low_s"] + head["lost_high_s"]) / 2,
                    lost_share_of_runtime=share)]


def lost_in(seconds, cls, found, beyond="lost_s"):
    """The finding about the time beyond cached I/O in the ops of class cls (beyond: their time
    lost compared with cached I/O, or their slowness_s), in wall-clock seconds."""
    process_s = seconds.of_class(CLASS_CODES[cls], beyond)
    found["at_stake_how"] = "their time lost compared with cached I/O" if beyond == "lost_s" else \
        "their time beyond a cached op's typical time"
    return seconds_in_wall_clock(seconds, found, process_s)


def seconds_in_wall_clock(seconds, found, process_s, shared_s=None, top=None):
    return in_wall_clock(found, seconds.clock, process_s, shared_s, top, WALL_CLOCK_HOW)


def stdio_findings(layers, seconds, unassessed=()):
    """Much of the data moved through stdio (Drishti's S01, on the same evidence: stdio's bytes
    over those of the POSIX, MPI-IO and stdio layers added up, as Drishti adds them, and of every
    module of the log that moved data ioassess does not assess, the unassessed_modules rows). At
    stake: the stdio calls' time, at most all a faster interface could save (an upper bound), in
    wall-clock seconds."""
    moved = {layer: sum(row[layer]["bytes"] for row in layers if row[layer]) for layer in ("posix", "mpiio", "stdio")}
    elsewhere = {row["module"]: row["bytes_read"] + row["bytes_written"] for row in unassessed
                 if row["bytes_read"] + row["bytes_written"]}
    total = sum(moved.values()) + sum(elsewhere.values())
    if not total or moved["stdio"] / total <= STDIO_BYTES_SHARE:
        return []
    stdio_s = sum(row["stdio"]["seconds"] for row in layers if row["stdio"])
    counted = {"bytes_all_modules": total, "unassessed_modules": ", ".join(elsewhere),
               "unassessed_modules_bytes": sum(elsewhere.values())} if elsewhere else {}
    found = finding("Much of the data went through stdio",
                    "fread, fwrite, fprintf and the other stdio calls moved a large share of the job's bytes" +
                    (f" (counted over every module of the log that moved data, {', '.join(elsewhere)} included)"
                     if elsewhere else "") +
                    ": each goes through the C library's buffer (4 KiB by default) and leaves the layout of the "
                    "requests to it. Large requests with read/write or MPI-IO, or a larger buffer (setvbuf), move "
                    "the same data in fewer, larger requests.", None, code="S01", level="high",
                    at_stake_how="the stdio calls' time, an upper bound of what another interface saves",
                    stdio_bytes=moved["stdio"], stdio_share=moved["stdio"] / total, stdio_s=stdio_s, **counted)
    ledger = seconds.ledger
    return [seconds.stake_of(found, io_rows(ledger) & (ledger["layer"] == STDIO))]


def straggler_findings(view, runtime_s):
    """Some ranks spent far longer in I/O than the mean rank (report/processes.py, stragglers):
    the slowest rank's excess over the mean is above IMBALANCE_STRAGGLERS of its time, and at least
    LOST_SHARE_WORTH_A_LOOK of the runtime. Whether the slowest ranks moved more data than the
    mean rank says whether the work or the way to storage is uneven. At stake: the slowest
    rank's I/O time less the mean rank's."""
    stragglers = view and view["stragglers"]
    if not stragglers or not stragglers["ranks"]:
        return []
    slowest, mean_s = stragglers["ranks"][0], stragglers["mean_s"]
    excess = slowest["seconds"] - mean_s
    if excess <= IMBALANCE_STRAGGLERS * slowest["seconds"] or \
            (runtime_s is not None and excess < LOST_SHARE_WORTH_A_LOOK * runtime_s):
        return []
    more_work = slowest["bytes"] > (1 + IMBALANCE_STRAGGLERS) * stragglers["mean_bytes"]
    text = ("The slowest ranks moved more data than the mean rank: the I/O work is split unevenly, and the job "
            "waits for its slowest rank wherever the ranks synchronise. Spreading the data evenly over the ranks, "
            "or collective I/O with an aggregator per node, lets them finish together." if more_work else
            "The slowest ranks moved no more data than the mean rank, yet took far longer: the difference is not "
            "in the work but on the way to storage (a slow storage target or server, contention with other jobs, "
            "a busy node), and the job waits for its slowest rank wherever the ranks synchronise. Compare the "
            "slowest ranks' files and nodes with the others' (Lustre: lfs getstripe gives a file's OSTs).")
    ranks = [{"rank": r["rank"], "pid": r["pid"], "seconds": r["seconds"] - mean_s}
             for r in stragglers["ranks"] if r["seconds"] > mean_s]
    found = finding("Some ranks spent far longer in I/O than the others", text, None, level="high",
                    files=stragglers["files"], ranks=ranks,
                    at_stake_how="the slowest rank's I/O time less the mean rank's: what the job waits for it "
                                 "beyond an even split, where the ranks wait for each other (wall-clock, at most the "
                                 "run time); an upper bound, reached where storage serves ranks side by side as fast "
                                 "each as one alone",
                    slowest_rank=slowest["rank"], slowest_s=slowest["seconds"], mean_s=mean_s,
                    slowest_bytes=slowest["bytes"], mean_bytes=stragglers["mean_bytes"],
                    imbalance=slowest["seconds"] / mean_s)
    wall = min(excess, runtime_s) if runtime_s else excess
    # the named files: the slowest ranks' time on them, as a part of the excess
    # process-seconds: the named ranks' excess; their files' seconds a part of it pro rata
    excess_s, full_s = sum(r["seconds"] for r in ranks), sum(r["seconds"] for r in stragglers["ranks"])
    found["files"] = [dict(f, seconds=f["seconds"] * excess_s / full_s) for f in found["files"]]
    return [with_stake(found, wall, excess_s)]


def slow_target_findings(targets, seconds):
    """Files on some storage targets (Lustre OSTs) took far longer per byte than the job's other
    files (report/storage_targets.py). At stake: their time beyond their bytes at the job's
    median time per MiB, in wall-clock seconds (each file's part held by the processes that
    spent time on it)."""
    if not targets or not targets["slow"]:
        return []
    slow = targets["slow"]
    names = sorted((f for t in slow for f in t["names"]), key=lambda f: -f["seconds"])[:SLOW_TARGET_FILES_NAMED]
    found = finding("Files on some storage targets were far slower",
                    "The job's files on these storage targets (Lustre OSTs) took many times longer per byte than "
                    "its files on the others: the target (its disks or its server) was slow or overloaded while "
                    "the job ran, not the job. Tell the site's admins which targets; until they are fixed, "
                    "placing files on other targets (lfs setstripe --ost, or a stripe count over several "
                    "targets) avoids them.", None, level="high", files=names,
                    at_stake_how="the files' time on these targets beyond their bytes at the job's median time "
                                 "per MiB",
                    slow_targets=", ".join(str(t["target"]) for t in slow),
                    files_on_them=sum(t["files"] for t in slow), slowest_target_time_per_MiB_s=slow[0]["s_per_mib"],
                    job_median_time_per_MiB_s=targets["median_s_per_mib"], targets=targets["targets"])
    process_s, shared_s, top = seconds.of_files(excess_on_slow_targets(seconds.job, seconds.per_file))
    return [seconds_in_wall_clock(seconds, found, process_s, shared_s, top)]


def sync_findings(flushed, io_s, seconds):
    """Syncs whose fixed cost, or time beyond the model's flushes, is worth a look (at least
    LOST_SHARE_WORTH_A_LOOK of the I/O time), in wall-clock seconds: each process's part pro rata
    of its syncs' time."""
    if flushed is None or flushed["fixed_s"] is None or not io_s:
        return []
    found = []
    syncs = seconds.ledger["direction"] == SYNC

    def part_of_syncs(f, saving):
        return seconds.stake_of(f, syncs, saving / flushed["seconds"] if flushed["seconds"] > 0 else 0.0)
    per_sync = flushed["fixed_s"] / flushed["syncs"]
    # The syncs' time against the model's time of one sync per file of the same bytes.
    once_per_file_s = flushed["files"] * per_sync + flushed["typical_s"] - flushed["fixed_s"]
    saving = max(flushed["seconds"] - once_per_file_s, 0.0)
    if flushed["syncs"] > flushed["files"] and saving >= LOST_SHARE_WORTH_A_LOOK * io_s:
        found.append(part_of_syncs(finding("Frequent syncs",
                             "Each fsync or fdatasync costs this file system a fixed time, however little it "
                             "has to write back. Syncing each file once, when its data must be safe (at the end "
                             "or at a checkpoint), saves that time for every other call.", saving,
                             syncs=flushed["syncs"], synced_files=flushed["files"], sync_s=flushed["seconds"],
                             fixed_per_sync_s=per_sync, once_per_file_s=once_per_file_s, saving_s=saving), saving))
    if flushed["beyond_bound_s"] >= LOST_SHARE_WORTH_A_LOOK * io_s:
        found.append(part_of_syncs(finding("Syncs slower than this file system's flushes",
                             "These syncs took longer than the model's slowest flush of as many bytes: the "
                             "device was busy with other write-back (other files, other processes) or slower "
                             "than when the model was made.", flushed["beyond_bound_s"],
                             slow_syncs=flushed["beyond_bound_syncs"], beyond_s=flushed["beyond_bound_s"]),
                                   flushed["beyond_bound_s"]))
    return found


def metadata_findings(meta, io_s, seconds):
    """Findings on metadata calls (docs/assessment.md, "Metadata"), each with the seconds at
    stake in wall-clock seconds (each process's part pro rata of its metadata time); the rules on
    repeated lookups and missing paths need calls known one by one."""
    if meta is None or not meta["seconds"]:
        return []
    found = []
    total_s = io_s + meta["seconds"]
    worth = LOST_SHARE_WORTH_A_LOOK * total_s
    per_rank = meta["per_rank"]
    above = per_rank["above_threshold"] if per_rank else []
    share = meta["share_of_io"] or 0.0
    if above or (share >= LOST_SHARE_WORTH_A_LOOK and meta["seconds"] >= METADATA_MIN_S):
        numbers = {"metadata_s": meta["seconds"], "share_of_io": share, "calls": meta["calls"],
                   "threshold_per_rank_s": METADATA_RANK_S, "ranks_above": len(above)}
        if above:
            numbers.update(slowest_rank=above[0]["rank"], slowest_rank_s=above[0]["seconds"],
                           above_s=sum(u["seconds"] for u in above))
        found.append(finding("Metadata time is high",
                             "Opening, closing, stat'ing and seeking took " +
                             (f"more than {METADATA_RANK_S:g} s on some ranks (Drishti's threshold), "
                              if above else "") +
                             ("a large share of the time the job spent in I/O calls" if
                              share >= LOST_SHARE_WORTH_A_LOOK else
                              f"{share:.1%} of the time the job spent in I/O calls") +
                             ": each such call is a round "
                             "trip to the file system's metadata server, however few bytes follow. Opening each "
                             "file once and keeping it open, fewer and larger files, and stat'ing once and "
                             "sharing the answer reduce it.", meta["seconds"],
                             code="P17" if above else None, level="high" if above else "warn", **numbers))
    repeated = meta["repeated"]
    if repeated and repeated["calls"] and repeated["seconds"] >= worth and repeated["seconds"] > 0:
        found.append(finding("The same files opened or stat'ed many times",
                             "The same file or directory was opened, stat'ed or checked (access) again and again: "
                             "every call after the first of its kind on a path is counted. Keeping the file open, "
                             "caching the answer of a stat, or having one rank make the call and share the result "
                             "saves the time of those calls.", repeated["seconds"],
                             repeated_calls=repeated["calls"], repeated_s=repeated["seconds"],
                             repeated_files=len(repeated["files"]), worst_file=repeated["files"][0]["name"] if
                             repeated["files"] else None))
    small = meta["small_files"]
    if small["files"] >= MANY_SMALL_FILES and small["seconds"] >= worth and small["seconds"] > 0:
        found.append(finding("Many small files",
                             f"Many files were opened that moved at most {SMALL_FILE_BYTES >> 20} MiB each: their "
                             "opens, closes and stats cost as much as their data. Packing them into fewer, larger "
                             "files (an archive, HDF5, a container image) or staging them in node-local storage "
                             "saves most of their metadata time.", small["seconds"],
                             small_files=small["files"], files_opened=small["opened"], small_files_bytes=small["bytes"],
                             small_files_calls=small["calls"], small_files_s=small["seconds"],
                             threshold_bytes=SMALL_FILE_BYTES))
    missing = meta["missing"]
    if missing and missing["calls"] >= MISSING_PATH_CALLS and missing["seconds"] >= worth and missing["seconds"] > 0:
        found.append(finding("Stat of missing paths",
                             "Lookups (open, stat, access, opendir) of paths that do not exist (ENOENT): typically a "
                             "search path tried entry by entry (Python's sys.path, LD_LIBRARY_PATH, a list of "
                             "configuration locations) on every process. Shorter search paths, or a copy of what is "
                             "looked for in the first place searched, save their time.",
                             missing["seconds"], missing_calls=missing["calls"], missing_s=missing["seconds"],
                             paths=missing["paths"]))
    calls = seconds.ledger["direction"] == META
    return [seconds.stake_of(f, calls, f["at_stake_s"] / meta["seconds"]) for f in found]


# What each access pattern (report/access_patterns.py) means and what to do: code -> (title, text).
PATTERN_WORDS = {
    "P01": ("Most requests are writes", "The job made more write requests than read requests: tuning its writes "
            "matters most."),
    "P02": ("Most requests are reads", "The job made more read requests than write requests: tuning its reads "
            "matters most."),
    "P03": ("Most bytes are written", "The job wrote more bytes than it read."),
    "P04": ("Most bytes are read", "The job read more bytes than it wrote."),
    "P05": ("Many small reads", "Many reads asked for at most 1 MiB: each pays a system call and, on a parallel file "
            "system, a round trip to a server. Reading larger blocks (buffering, or collective MPI-IO that "
            "merges the ranks' requests) moves the same bytes in fewer requests."),
    "P06": ("Many small writes", "Many writes moved at most 1 MiB: each pays a system call and, on a parallel file "
            "system, a round trip and locking. Buffering writes into larger blocks (or collective MPI-IO) moves "
            "the same bytes in fewer requests."),
    "P07": ("Buffers not aligned in memory", "Many requests read into or wrote from buffers not aligned in memory: "
            "with O_DIRECT they fail or are copied, and the copy costs when data is not cached. Allocating buffers "
            "with posix_memalign (4 KiB) avoids it."),
    "P08": ("Requests not aligned to the file system's blocks", "Many requests started at offsets that are not a "
            "multiple of the file system's block (on Lustre, stripe) size: a request that covers part of a block "
            "makes the file system read or lock the whole block. Aligning offsets and sizes to the block size "
            "(HDF5: H5Pset_alignment; MPI-IO: striping hints) avoids it."),
    "P09": ("Data read more than once", "Some bytes were read more than once by the same job: reading each once and "
            "keeping it in memory (or sharing it between ranks) saves the second read."),
    "P10": ("Data written more than once", "Some bytes were written more than once: each byte written once (the "
            "final version) saves the earlier writes."),
    "P11": ("Random reads", "Many reads jumped backwards or elsewhere in their files instead of continuing where the "
            "previous read ended: storage and read-ahead serve sequential reads far faster. Reading in file order, "
            "or collective MPI-IO, turns them into sequential requests."),
    "P12": ("Reads are mostly sequential", "Most reads continued where the previous one ended or past it."),
    "P13": ("Random writes", "Many writes went backwards or elsewhere in their files instead of continuing where "
            "the previous write ended: writing in file order, or collective MPI-IO, turns them into sequential "
            "requests."),
    "P14": ("Writes are mostly sequential", "Most writes continued where the previous one ended or past it."),
    "P15": ("Many small reads of shared files", "Files that several ranks share were read in many requests of at most "
            "1 MiB: on a parallel file system the ranks' small requests contend for the same servers and locks. "
            "Collective MPI-IO reads merge them into large ones."),
    "P16": ("Many small writes to shared files", "Files that several ranks share were written in many requests of at "
            "most 1 MiB: the ranks' small writes contend for the same locks. Collective MPI-IO writes (or one "
            "aggregator rank per node) merge them into large ones."),
    "P18": ("Ranks moved unequal shares of shared files", "On shared files, the rank that moved most bytes moved "
            "much more than the one that moved fewest: the others wait for it. Spreading the data evenly over "
            "the ranks (or collective I/O) lets them finish together."),
    "P19": ("Stragglers on shared files", "On shared files, the slowest rank spent much longer in I/O than the "
            "fastest: the others wait for it at the next synchronisation. Spreading the requests evenly, or "
            "collective I/O, lets them finish together."),
    "P21": ("Ranks wrote unequal amounts of the same files", "Some ranks wrote far fewer bytes of a file than "
            "others (some none): the ranks that write most set the pace. An even split, or one writer per node "
            "with collective I/O, balances them."),
    "P22": ("Ranks read unequal amounts of the same files", "Some ranks read far fewer bytes of a file than others "
            "(some none): the ranks that read most set the pace. Reading once and broadcasting, or an even split, "
            "balances them."),
    "M01": ("Several processes, no MPI-IO", "The job's ranks moved their data without MPI-IO: MPI-IO (directly or "
            "through HDF5, NetCDF, ADIOS) can merge and align the ranks' requests, which plain calls cannot."),
    "M02": ("No collective MPI-IO reads", "The job read through MPI-IO with independent calls only: collective reads "
            "(MPI_File_read_all, _at_all) let MPI-IO merge the ranks' requests into few large ones from a few "
            "aggregators."),
    "M03": ("No collective MPI-IO writes", "The job wrote through MPI-IO with independent calls only: collective "
            "writes (MPI_File_write_all, _at_all) let MPI-IO merge the ranks' requests into few large ones."),
    "M04": ("Collective MPI-IO reads are used", "The job reads through collective MPI-IO calls."),
    "M05": ("Collective MPI-IO writes are used", "The job writes through collective MPI-IO calls."),
    "M06": ("Blocking MPI-IO reads", "Every MPI-IO read blocked until its data arrived: non-blocking reads "
            "(MPI_File_iread, iread_all) let computation go on meanwhile and hide part of their time."),
    "M07": ("Blocking MPI-IO writes", "Every MPI-IO write blocked until its data was handed over: non-blocking "
            "writes (MPI_File_iwrite, iwrite_all) let computation go on meanwhile and hide part of their time."),
    "M08": ("Fewer MPI-IO aggregators than nodes", "Fewer processes did the collective MPI-IO calls' file "
            "system I/O (the aggregators) than the job has nodes: some nodes' links to the file system stay idle "
            "during collective I/O."),
    "M09": ("Several MPI-IO aggregators per node", "More processes did the collective MPI-IO calls' file system "
            "I/O (the aggregators) than the job has nodes: aggregators on one node share its network link and "
            "exchange data among themselves. One aggregator per node (ROMIO hints cb_nodes=<nodes> and "
            "cb_config_list=*:1) is usually best."),
    "M10": ("One MPI-IO aggregator per node", "The collective MPI-IO calls' file system I/O was done by one "
            "process per node."),
}
# P09/P10 by who moved the bytes again (access_patterns.again_by): "process" (one process its
# own bytes), "processes" (bytes other processes moved too), "both".
AGAIN_WORDS = {
    ("P09", "process"): ("Data read more than once by the same process", "Processes read bytes of a file that "
                         "they had read before: reading each once and keeping it in memory saves the second read."),
    ("P09", "processes"): ("Several processes read the same data", "Different processes (ranks) read the same "
                           "bytes of the same files, each its own copy: reading the data once (one rank, or "
                           "collective MPI-IO) and sharing it (MPI_Bcast, node-local storage) saves the other "
                           "reads."),
    ("P09", "both"): ("Data read more than once, by the same and by other processes", "Processes read bytes of a "
                      "file they had read before, and different processes read the same bytes: reading each once "
                      "and keeping it in memory, or sharing it between ranks, saves the other reads."),
    ("P10", "process"): ("Data written more than once by the same process", "Processes wrote bytes of a file "
                         "that they had written before: writing each byte once (the final version) saves the "
                         "earlier writes."),
    ("P10", "processes"): ("Several processes wrote the same data", "Different processes (ranks) wrote the same "
                           "bytes of the same files: only the last write of each byte stays, and without an order "
                           "between them which one is a race. One writer per part saves the other writes."),
    ("P10", "both"): ("Data written more than once, by the same and by other processes", "Processes wrote bytes "
                      "they had written before, and different processes wrote the same bytes: each byte written "
                      "once, by one rank, saves the other writes."),
    ("P09", "shared"): ("The ranks together read more bytes than their files hold", "On files the ranks share, "
                        "the ranks together read more bytes than the highest offset read: several ranks read the "
                        "same bytes, or one rank read bytes again (Darshan's shared record counts the ranks "
                        "together and does not tell which). Reading each byte once and sharing it between ranks "
                        "(MPI_Bcast, collective MPI-IO) saves the other reads."),
    ("P10", "shared"): ("The ranks together wrote more bytes than their files hold", "On files the ranks share, "
                        "the ranks together wrote more bytes than the highest offset written: several ranks wrote "
                        "the same bytes, or one rank wrote bytes again (Darshan's shared record counts the ranks "
                        "together and does not tell which). Each byte written once, by one rank, saves the other "
                        "writes."),
}
DAOS_WORDS = (" Some of the data went to DAOS (see \"Modules not assessed\"), past POSIX and MPI-IO, where "
              "ioassess does not assess it: whether that I/O would gain from MPI-IO is not judged, and this finding "
              "is information only.")
SHARED_RECORD_WORDS = (" Darshan's shared records count the ranks together: from them it cannot be told whether a "
                       "rank also moved its own bytes again.")
# Numbers of a pattern that are not shown as numbers (they have their own place on the page).
PATTERN_PLACES = ("code", "level", "files", "ranks", "at_stake_s", "rank_seconds", "at_stake_how", "again_by")


def pattern_finding(p):
    """The finding of one access pattern: its words, its evidence's numbers, files, ranks and
    seconds at stake."""
    title, text = AGAIN_WORDS.get((p["code"], p.get("again_by")), PATTERN_WORDS[p["code"]])
    if p.get("again_in_shared_records_bytes") and p.get("again_by") != "shared":
        text += SHARED_RECORD_WORDS
    if p.get("bytes_to_daos"):
        text += DAOS_WORDS
    numbers = {key: value for key, value in p.items() if key not in PATTERN_PLACES and value is not None}
    return dict(finding(title, text, p["at_stake_s"], code=p["code"], level=p["level"], files=p["files"],
                        ranks=p["ranks"], at_stake_how=p["at_stake_how"], **numbers), rank_seconds=p["rank_seconds"])
