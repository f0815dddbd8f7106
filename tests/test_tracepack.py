"""Trace packs and the per-node layout (docs/epilog.md, "The per-node layout"; docs/trace-format.md,
"Packs"): real programs under the recorder write their traces to a node-local directory, the
epilog's pack step (`ioassess epilog` with pack_dir, as Slurm runs it on each node) packs them
into one file per node on the shared directory, and `ioassess report` reads the packs as it
reads the trace files, with the same numbers. Damaged packs, packs of another uid, a packer
killed mid-way and sparse members.

The epilog runs as the job's user here is the user running the tests (SLURM_JOB_UID is its own
uid): as root, it starts its worker as root; as another user, it runs as a TaskEpilog does.
"""
import glob
import json
import os
import pathlib
import re
import signal
import stat
import subprocess
import sys
import zlib

import numpy as np
import pytest

from ioassess.inputs import traceformat as tf
from ioassess.inputs import tracepack
from ioassess.inputs.trace import read_trace_dir
from ioassess.site.epilog import EpilogError, hosts_of
from ioassess.site.training import workload_program_path
from recorder_helpers import describe, run, wait_until

JOB = "5150"
MODEL = "local-linux"   # a shipped model: the reports compared must not depend on which one is chosen
# A process that forks `$3` children, one after the other, each writing a little with the workload
# generator (a fork and an exec each: two traces per child).
FORKER = """#!/bin/sh
i=0
while [ $i -lt "$3" ]; do
  "$1" --file "$2/f$((i % 8))" --op write --size 4k --repeats 2 --mem-buffer 4k --create --file-span 8k >/dev/null \
    || exit 1
  i=$((i + 1))
done
"""


@pytest.fixture
def node(tmp_path):
    """A node's directories: node-local traces (0700, as the recorder wants), the shared one the
    packs go to, the reports' and the work directory of the recorded programs."""
    paths = {name: tmp_path / name for name in ("local", "shared", "out", "work")}
    for name, path in paths.items():
        path.mkdir(mode=0o700 if name == "local" else 0o755)
    (tmp_path / "forker.sh").write_text(FORKER)
    os.chmod(tmp_path / "forker.sh", 0o755)
    paths["forker"] = tmp_path / "forker.sh"
    return type("Node", (), paths)


def record(recorder_lib, node, children, job=JOB, local=None, host=None):
    """The forker run under the recorder with `children` children, its traces in node.local
    (or `local`); the traces."""
    local = local or node.local
    env = {"IOASSESS_JOB_ID": job, **({"IOASSESS_HOSTNAME": host} if host else {})}
    result = run([node.forker, workload_program_path(), node.work, children], env=env, preload=[recorder_lib],
                 trace_dir=local)
    assert result.returncode == 0, describe(result)
    traces = sorted(glob.glob(os.path.join(local, f"ioassess_{job}_*.iot")))
    assert len(traces) == 2 * children + 1, len(traces)
    return traces


def settings(node, **overrides):
    values = {"trace_dir": str(node.local), "pack_dir": str(node.shared), "output": f"{node.out}/ioassess-%j.html",
              "json": f"{node.out}/ioassess-%j.json", "model": MODEL, "time_limit": "50", "pack_wait": "40"}
    values.update(overrides)
    path = node.out.parent / "epilog.conf"
    path.write_text("[epilog]\n" + "".join(f"{name} = {value}\n" for name, value in values.items()))
    return path


def slurm_environment(name, nodelist, job=JOB):
    return {"SLURM_JOB_ID": job, "SLURM_JOB_UID": str(os.geteuid()), "SLURMD_NODENAME": name,
            "SLURM_JOB_NODELIST": nodelist, "SLURM_SCRIPT_CONTEXT": "epilog_slurmd"}


def the_line(result):
    """The epilog's one line (exit status 0), after `ioassess epilog[PID]: ` and `job ID (USER): `."""
    assert result.returncode == 0, describe(result)
    (line,) = result.stderr.splitlines()
    return re.sub(r"^job \d+ \([^)]*\): ", "", line.split("]: ", 1)[1])


def report_json(ioassess, tmp_path, *inputs, name="report"):
    """The assessment `ioassess report INPUTS --json` writes."""
    out = tmp_path / f"{name}.json"
    result = ioassess("report", *inputs, "--model", MODEL, "-o", tmp_path / f"{name}.html", "--json", out)
    assert result.returncode == 0, describe(result)
    return json.loads(out.read_text())


def without_inputs(assessment):
    """The assessment without the inputs' paths (a directory of traces, or a pack), which name
    what was read, not what it holds."""
    return {**assessment, "job": {**assessment["job"], "inputs": None}}


def assert_same_assessment(expected, got):
    """Field by field: the first difference is named."""
    def compare(a, b, where):
        assert type(a) is type(b), f"{where}: {a!r} != {b!r}"
        if isinstance(a, dict):
            assert a.keys() == b.keys(), f"{where}: keys {sorted(a.keys() ^ b.keys())}"
            for key in a:
                compare(a[key], b[key], f"{where}.{key}")
        elif isinstance(a, list):
            assert len(a) == len(b), f"{where}: {len(a)} items != {len(b)}"
            for index, (x, y) in enumerate(zip(a, b)):
                compare(x, y, f"{where}[{index}]")
        else:
            assert a == b, f"{where}: {a!r} != {b!r}"
    compare(without_inputs(expected), without_inputs(got), "assessment")


@pytest.mark.slow
def test_a_job_of_1000_processes_is_one_pack_per_node_reported_as_its_trace_files(ioassess, recorder_lib, node,
                                                                                   tmp_path):
    """1,000 children (2,001 process images) under the recorder, traces node-local; the epilog
    packs them into the shared directory (one file, the job user's, 0600), removes them, and
    makes the report from the pack: the same assessment, field by field, as the report of the
    trace files, and as `ioassess report` of the pack."""
    traces = record(recorder_lib, node, 1000)
    stored = sum(os.stat(path).st_blocks * 512 for path in traces)
    of_files = report_json(ioassess, tmp_path, node.local, name="files")
    pack = node.shared / f"ioassess_{JOB}_node1{tracepack.PACK_SUFFIX}"
    result = ioassess("epilog", "--config", settings(node), env=slurm_environment("node1", "node1"))
    assert the_line(result) == (f"packed 2001 traces into {pack}; wrote {node.out}/ioassess-{JOB}.html and "
                                f"{node.out}/ioassess-{JOB}.json")
    assert os.listdir(node.shared) == [pack.name]
    assert os.listdir(node.local) == []
    status = os.stat(pack)
    assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (os.geteuid(), 0o600)
    assert status.st_size < stored / 2, "the traces' pages of zeros were packed"
    by_epilog = json.loads((node.out / f"ioassess-{JOB}.json").read_text())
    assert [(entry["path"], entry["kind"]) for entry in by_epilog["job"]["inputs"]] == [(str(pack), "trace")]
    assert by_epilog["job"]["processes_recorded"] == 2001
    assert_same_assessment(of_files, by_epilog)
    assert_same_assessment(of_files, report_json(ioassess, tmp_path, pack, name="pack"))


def test_the_reporting_node_waits_for_every_nodes_pack_and_reads_them_all(ioassess, start_ioassess, recorder_lib,
                                                                          node, tmp_path):
    """Two nodes: the first of the node list packs its traces and waits for the other's pack (a
    state: the file under its final name), then reports on both; the other only packs. The
    report has both nodes' processes, as the report of all the trace files has them."""
    other_local = tmp_path / "local2"
    other_local.mkdir(mode=0o700)
    record(recorder_lib, node, 2, host="node1")
    record(recorder_lib, node, 3, local=other_local, host="node2")
    everything = tmp_path / "everything"
    everything.mkdir()
    for path in [*node.local.iterdir(), *other_local.iterdir()]:
        os.link(path, everything / path.name)
    of_files = report_json(ioassess, tmp_path, everything, name="files")
    first = start_ioassess("epilog", "--config", settings(node), env=slurm_environment("node1", "node[1-2]"))
    own = node.shared / f"ioassess_{JOB}_node1.iotpack"
    wait_until(own.exists, "pack of node1", first)
    assert not (node.out / f"ioassess-{JOB}.json").exists(), "node1 reported before node2's pack was there"
    second = ioassess("epilog", "--config", settings(node, trace_dir=other_local),
                      env=slurm_environment("node2", "node[1-2]"))
    assert the_line(second) == f"packed 7 traces into {node.shared}/ioassess_{JOB}_node2.iotpack"
    stdout, stderr = first.communicate(timeout=120)
    assert the_line(subprocess.CompletedProcess(first.args, first.returncode, stdout, stderr)) == (
        f"packed 5 traces into {own}; wrote {node.out}/ioassess-{JOB}.html and {node.out}/ioassess-{JOB}.json")
    assert sorted(os.listdir(node.shared)) == [f"ioassess_{JOB}_node1.iotpack", f"ioassess_{JOB}_node2.iotpack"]
    by_epilog = json.loads((node.out / f"ioassess-{JOB}.json").read_text())
    assert [entry["path"] for entry in by_epilog["job"]["inputs"]] == sorted(map(str, node.shared.iterdir()))
    assert_same_assessment(of_files, by_epilog)


def test_a_node_whose_pack_does_not_come_is_named_and_the_others_reported(ioassess, recorder_lib, node):
    """The reporting node waits pack_wait seconds at most, then reports what it has, with a note
    naming the nodes whose packs are missing, in the line and in the report."""
    record(recorder_lib, node, 1)
    result = ioassess("epilog", "--config", settings(node, pack_wait="1"),
                      env=slurm_environment("n08", "n[08-10]"))
    missing = "the packs of 2 nodes of 3 were missing after 1 s: n09, n10"
    assert the_line(result).endswith(f"wrote {node.out}/ioassess-{JOB}.html and {node.out}/ioassess-{JOB}.json; "
                                     f"{missing}")
    assessment = json.loads((node.out / f"ioassess-{JOB}.json").read_text())
    assert f"{missing}: this report lacks their processes" in assessment["job"]["notes"]
    assert assessment["job"]["processes_recorded"] == 3
    assert os.listdir(node.shared) == [f"ioassess_{JOB}_n08.iotpack"]


def test_a_node_without_traces_of_the_job_writes_an_empty_pack(ioassess, node):
    """So that the reporting node knows it is done; the report of packs without traces says so."""
    result = ioassess("epilog", "--config", settings(node), env=slurm_environment("node1", "node1"))
    pack = node.shared / f"ioassess_{JOB}_node1.iotpack"
    assert the_line(result) == (f"packed 0 traces into {pack}; nothing to report: no trace in the packs "
                                f"{node.shared}/ioassess_{JOB}_*.iotpack")
    assert tracepack.pack_member_count(pack) == 0


# --- packs written here, then damaged ------------------------------------------------------

@pytest.fixture
def packed(recorder_lib, node):
    """A pack of a few real traces (node.pack) and the traces themselves (node.traces)."""
    node.traces = record(recorder_lib, node, 2)
    node.pack = node.shared / f"ioassess_{JOB}_node1.iotpack"
    assert tracepack.write_pack(node.pack, node.traces) == (node.traces, [])
    return node


def rewritten(path, change):
    """The pack at path with its header and index changed by change(header, members, extents,
    names) (numpy records and a bytearray, changed in place) and its checksum made right again."""
    data = path.read_bytes()
    header = np.frombuffer(data[:tracepack.HEADER_BYTES], tracepack.PACK_HEADER_DTYPE).copy()
    start, n, m = int(header["index_offset"][0]), int(header["members"][0]), int(header["extents"][0])
    members = np.frombuffer(data, tracepack.MEMBER_DTYPE, n, start).copy()
    extents = np.frombuffer(data, tracepack.EXTENT_DTYPE, m, start + members.nbytes).copy()
    names = bytearray(data[start + members.nbytes + extents.nbytes:])
    change(header[0], members, extents, names)
    index = members.tobytes() + extents.tobytes() + bytes(names)
    header["index_crc32"] = zlib.crc32(index)
    path.write_bytes(header.tobytes() + data[tracepack.HEADER_BYTES:start] + index)


def changed(record, **fields):
    """A change for rewritten(): fields of one of the records it is given (which picks it)."""
    def change(*records):
        for field, value in fields.items():
            record(*records)[field] = value
    return change


def same_name(header, members, extents, names):
    members[1]["name_offset"], members[1]["name_bytes"] = members[0]["name_offset"], members[0]["name_bytes"]


def slash_in_name(header, members, extents, names):
    names[int(members[0]["name_offset"]) + 3] = ord("/")


DAMAGES = {
    "truncated to nothing": (lambda p: p.write_bytes(b""), "truncated: 0 bytes, a pack's header alone needs 64"),
    "truncated in its magic": (lambda p: p.write_bytes(p.read_bytes()[:7]), "truncated: 7 bytes"),
    "truncated in its header": (lambda p: p.write_bytes(p.read_bytes()[:40]), "truncated: 40 bytes"),
    "truncated after its header": (lambda p: p.write_bytes(p.read_bytes()[:64]), "truncated: 64 bytes, its header "
                                                                                 "says"),
    "truncated in its data": (lambda p: p.write_bytes(p.read_bytes()[:5000]), "truncated: 5000 bytes"),
    "truncated in its index": (lambda p: p.write_bytes(p.read_bytes()[:-30]), "truncated:"),
    "one byte short": (lambda p: p.write_bytes(p.read_bytes()[:-1]), "truncated:"),
    "appended to": (lambda p: p.write_bytes(p.read_bytes() + b"x"), "something was appended?"),
    "not a pack": (lambda p: p.write_bytes(b"just some text, long enough to be a header" * 3), "bad magic"),
    "index bytes flipped": (lambda p: p.write_bytes(p.read_bytes()[:-40] + bytes(b ^ 0xFF for b in p.read_bytes()[
        -40:-30]) + p.read_bytes()[-30:]), "corrupt: its index's checksum is"),
    "absurd member count": (lambda p: rewritten(p, changed(lambda h, m, e, n: h, members=1 << 40)),
                            f"corrupt: {1 << 40} members, more than the {tracepack.MAX_MEMBERS} this reader takes"),
    "index past the end": (lambda p: rewritten(p, changed(lambda h, m, e, n: h, index_offset=1 << 40)),
                           "corrupt: its index ["),
    "extent past the index": (lambda p: rewritten(p, changed(lambda h, m, e, n: e[0], pack_offset=1 << 40)),
                              "corrupt: extent 0 (of member 0) is not in the pack's data"),
    "extent past its member": (lambda p: rewritten(p, changed(lambda h, m, e, n: e[0], length=1 << 50)),
                               "corrupt: extent 0 (of member 0) reaches past its member's end"),
    "overlapping members": (lambda p: rewritten(p, changed(lambda h, m, e, n: e[-1], pack_offset=64)),
                            "corrupt: members 0 and 4 overlap in the pack at offset 64"),
    "extents not its member's": (lambda p: rewritten(p, changed(lambda h, m, e, n: m[1], first_extent=0)),
                                 "corrupt: member 1's extents are not where its index puts them"),
    "name out of the index": (lambda p: rewritten(p, changed(lambda h, m, e, n: m[2], name_offset=1 << 20)),
                              "corrupt: member 2 has a name outside the index's names"),
    "a name with a slash": (lambda p: rewritten(p, slash_in_name), "corrupt: member 0 has the name b'ioa/"),
    "two members of one name": (lambda p: rewritten(p, same_name), "corrupt: two members have the same name"),
}


@pytest.mark.parametrize("damage", ["truncated in its header", "truncated in its data", "truncated in its index",
                                    "index bytes flipped", "overlapping members"])
def test_a_damaged_pack_is_one_line_naming_it_and_exit_2(ioassess, packed, tmp_path, damage):
    make, problem = DAMAGES[damage]
    make(packed.pack)
    result = ioassess("report", packed.pack, "-o", tmp_path / "report.html")
    assert result.returncode == 2 and "Traceback" not in result.stderr, describe(result)
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"ioassess: {packed.pack}: ") and problem in line, line
    assert not (tmp_path / "report.html").exists()


def test_every_damage_is_refused_with_its_problem_before_anything_is_read(packed, tmp_path):
    """The reader's error (one line, the pack's path first) for each damage of DAMAGES."""
    good = packed.pack.read_bytes()
    for number, (damage, (make, problem)) in enumerate(DAMAGES.items()):
        path = tmp_path / f"damaged{number}.iotpack"
        path.write_bytes(good)
        make(path)
        traceset = read_trace_dir(path)
        (error,) = traceset.errors
        assert not traceset.processes and "\n" not in str(error), damage
        assert str(error).startswith(f"{path}: ") and problem in str(error), (damage, str(error))


def test_a_damaged_pack_among_good_traces_is_a_note_and_the_rest_is_reported(ioassess, packed, tmp_path):
    """A directory of a damaged pack, a good pack and plain trace files: the report has the good
    pack's and the files' processes, and names the damaged pack in its notes."""
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    good = mixed / "ioassess_1_good.iotpack"
    tracepack.write_pack(good, packed.traces[:3])
    for path in packed.traces[3:]:
        os.link(path, mixed / os.path.basename(path))
    damaged = mixed / "ioassess_1_damaged.iotpack"
    damaged.write_bytes(packed.pack.read_bytes()[:-1])
    assessment = report_json(ioassess, tmp_path, mixed)
    assert assessment["job"]["processes_recorded"] == len(packed.traces)
    named = [note for note in assessment["job"]["notes"] if str(damaged) in note]
    assert named == [f"{damaged}: truncated: {damaged.stat().st_size} bytes, its header says "
                     f"{packed.pack.stat().st_size}"]
    assessment["job"]["notes"].remove(named[0])
    assert_same_assessment(report_json(ioassess, tmp_path, *packed.traces, name="files"), assessment)


@pytest.mark.root
def test_a_pack_of_another_uid_is_refused(ioassess, packed, tmp_path):
    """Its members are refused, as trace files of another uid are: by the pack's owner, and by
    the owner each member had when it was packed."""
    os.chown(packed.pack, 12345, 12345)
    result = ioassess("report", packed.pack, "-o", tmp_path / "report.html")
    assert result.returncode == 2, describe(result)
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"ioassess: {packed.pack}/") and "in a pack that belongs to uid 12345, not to uid 0 " \
        "whose traces these are: refused" in line, line
    result = ioassess("report", packed.pack, "--owner", "12345", "-o", tmp_path / "report.html")
    assert result.returncode == 2 and "packed as a file of uid 0, not of uid 12345" in result.stderr, describe(result)
    assert all("belong" in str(error) or "packed as" in str(error)
               for error in read_trace_dir(packed.pack, owner_uid=12345).errors)


# A packer that stops, for good, after writing its first member: its parent kills it then.
STOPPING_PACKER = """
import sys
from ioassess.inputs.tracepack import write_pack

def stop(path):
    print("wrote", path, flush=True)
    sys.stdin.read()

write_pack(sys.argv[1], sys.argv[2:], on_member=stop)
"""


def test_a_packer_killed_mid_way_leaves_no_pack(packed):
    """SIGKILLed while it writes (its temporary file is there, it has written a member), the
    packer leaves nothing under the pack's name: only its temporary file, which no reader
    takes for a pack. A packer that fails removes its temporary file too."""
    pack = packed.shared / "ioassess_2_node1.iotpack"
    packer = subprocess.Popen([sys.executable, "-c", STOPPING_PACKER, pack, *packed.traces], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert packer.stdout.readline() == f"wrote {packed.traces[0]}\n"
    (temporary,) = packed.shared.glob(f".{pack.name}.*.part")
    assert temporary.stat().st_size > tracepack.HEADER_BYTES and not pack.exists()
    packer.send_signal(signal.SIGKILL)
    assert packer.wait(timeout=60) == -signal.SIGKILL
    assert not pack.exists() and temporary.exists()
    assert [path.name for path in packed.shared.glob("*.iotpack")] == [packed.pack.name]

    def fail(path):
        raise RuntimeError("stopped")
    with pytest.raises(RuntimeError):
        tracepack.write_pack(pack, packed.traces, on_member=fail)
    assert not pack.exists() and sorted(packed.shared.glob(".*.part")) == [temporary]


def test_sparse_members_are_packed_without_their_holes_and_read_the_same(ioassess, packed, tmp_path):
    """A trace with a hole of 1 TiB at its end, and one whose pages of zeros are holes: the pack
    holds only their data, the members read back byte for byte (holes as zeros, and found as
    holes by SEEK_DATA / SEEK_HOLE), and `ioassess show` of the pack is that of the files."""
    sparse = tmp_path / "sparse"
    sparse.mkdir(mode=0o700)
    big, holed = (sparse / os.path.basename(path) for path in packed.traces[-2:])
    data = pathlib.Path(packed.traces[-2]).read_bytes()
    big.write_bytes(data)
    os.truncate(big, len(data) + (1 << 40))
    original = pathlib.Path(packed.traces[-1]).read_bytes()
    with open(holed, "wb") as f:   # every page of zeros skipped: a hole
        for offset in range(0, len(original), tf.PAGE_BYTES):
            page = original[offset:offset + tf.PAGE_BYTES]
            if page.strip(b"\0"):
                f.seek(offset)
                f.write(page)
        f.truncate(len(original))
    assert os.stat(holed).st_blocks * 512 < len(original)
    pack = tmp_path / "sparse.iotpack"
    tracepack.write_pack(pack, [big, holed])
    assert pack.stat().st_size < len(data) + len(original)
    members = {os.path.basename(member): member for member in tracepack.pack_entries(pack)}
    file, size = members[big.name].open_trace(os.geteuid())
    with file:
        assert size == len(data) + (1 << 40)
        assert file.read(len(data) + 4096) == data + bytes(4096)
        assert file.seek(len(data), os.SEEK_HOLE) == len(data)
        with pytest.raises(OSError, match="No such device or address"):
            file.seek(len(data), os.SEEK_DATA)
        assert file.seek(-10, os.SEEK_END) == size - 10 and file.read() == bytes(10)
    file, size = members[holed.name].open_trace(None)
    with file:
        assert (size, file.read()) == (len(original), original)
        regions, position = [], 0   # the member's data regions, as SEEK_DATA and SEEK_HOLE find them
        while True:
            try:
                position = file.seek(position, os.SEEK_DATA)
            except OSError:
                break
            regions.append((position, file.seek(position, os.SEEK_HOLE)))
            position = regions[-1][1]
        assert sum(end - start for start, end in regions) < len(original)
        in_holes = bytearray(original)
        for start, end in regions:
            in_holes[start:end] = bytes(end - start)
        assert not any(in_holes), "a hole of the member is not zeros in the trace"

    def shown(path):
        result = ioassess("show", path, "--json")
        assert result.returncode == 0, describe(result)
        summary = json.loads(result.stdout)
        for process in summary["processes"]:
            process["path"] = os.path.basename(process["path"])
        return summary
    assert shown(pack) == shown(sparse)


@pytest.mark.parametrize("nodelist, hosts", [
    ("node1", ["node1"]), ("n[08-10,14],gpu3", ["n08", "n09", "n10", "n14", "gpu3"]), ("n[8-10]", ["n8", "n9", "n10"]),
    ("rack[2-3]-n[1-2]", ["rack2-n1", "rack2-n2", "rack3-n1", "rack3-n2"]), ("c[001-002]x,d", ["c001x", "c002x", "d"]),
])
def test_the_reporting_node_waits_for_every_host_of_the_node_list(nodelist, hosts):
    assert hosts_of(nodelist) == hosts


@pytest.mark.parametrize("nodelist", ["n[1-3", "n1-3]", "n[3-1]", "n[a-b]", "n[1-2000000]"])
def test_a_node_list_that_is_not_one_is_refused(nodelist):
    with pytest.raises(EpilogError, match=f"node list '{re.escape(nodelist)}': "):
        hosts_of(nodelist)


def test_the_per_node_layout_is_a_settings_error_under_the_task_epilog(ioassess, node):
    """A TaskEpilog runs while other tasks of the node may still write their traces."""
    env = {**slurm_environment("node1", "node1"), "SLURM_PROCID": "0", "SLURM_SCRIPT_CONTEXT": "epilog_task"}
    result = ioassess("epilog", "--config", settings(node), env=env)
    assert the_line(result).startswith("pack_dir is set: the per-node layout needs Slurm's Epilog, not the TaskEpilog")
    result = ioassess("epilog", "--config", settings(node, pack_wait="50"), env=slurm_environment("node1", "node1"))
    assert the_line(result) == "pack_wait (50 s) must be less than time_limit (50 s): the report is made after the wait"
    assert os.listdir(node.shared) == []
