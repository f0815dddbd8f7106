"""GlusterFS over FUSE (tests/glusterfs.py): real programs under the real recorder on a mounted
one-brick volume, and the volume's teardown.

The teardown tests come first and make volumes of their own: one volume is up at a time on a
machine (glusterd's port), and the module's glusterfs_volume is made at its first test that
uses it, after them."""
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import glusterfs
from conftest import RUN_TIMEOUT_S, _installed_cli, reachable_installation
from ioassess.inputs.job import READ, WRITE
from ioassess.inputs.load import load_job
from ioassess.models.modelfile import load_model
from ioassess.report.model_choice import host_class
from ioassess.site.training import workload_program_path
from recorder_helpers import OP_CODES, describe, load, prog, select

pytestmark = [pytest.mark.glusterfs, pytest.mark.root]

PAGE = os.sysconf("SC_PAGE_SIZE")
FIRST_OPS_SAMPLED = 4       # the recorder samples the first 4 ops of each open file


def nothing_left(vol):
    """What of the volume is still there: mounts, processes, files (empty when nothing is)."""
    left = [f"mount {point}" for point in glusterfs.mounts_under(vol.base)]
    left += [f"process {pid}: {cmdline}" for pid, cmdline in glusterfs.gluster_processes().items()]
    left += [f"{vol.base} exists"] if vol.base.exists() else []
    with open("/proc/mounts") as f:
        left += [f"mount {line.strip()}" for line in f if line.split()[2] == "fuse.glusterfs"]
    return left


def test_a_volume_leaves_no_mount_and_no_process_after_its_with_block_even_one_that_raised():
    with pytest.raises(RuntimeError, match="in the with block"):
        with glusterfs.volume() as vol:
            assert glusterfs.mount_type(vol.mount) == "fuse.glusterfs"
            (vol.mount / "data").write_bytes(b"x" * 65536)
            assert (vol.brick / "data").stat().st_size == 65536       # the server's copy
            pids = vol.pids()
            kinds = {os.path.basename(cmdline.split()[0]) for cmdline in pids.values()}
            assert kinds == {"glusterd", "glusterfsd", "glusterfs"}, pids
            raise RuntimeError("a failure in the with block")
    assert nothing_left(vol) == []
    assert not any(glusterfs.running(pid) for pid in pids)


def test_a_volume_of_a_killed_run_is_removed_before_the_next_one_is_made(tmp_path):
    # a process that makes a volume and is killed before its teardown
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]); import glusterfs\n"
              "made = glusterfs.volume(); vol = made.__enter__(); print(vol.base, flush=True); time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", script, os.path.dirname(glusterfs.__file__)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        killed_base = owner.stdout.readline().strip()
        assert killed_base, owner.stderr.read()
        killed_pids = glusterfs.processes_naming(killed_base)
        assert len(killed_pids) == 3 and glusterfs.mounts_under(killed_base), killed_pids
    finally:
        owner.kill()
        owner.wait()
    with glusterfs.volume() as vol:
        assert glusterfs.mounts_under(killed_base) == [] and not os.path.exists(killed_base)
        assert not any(glusterfs.running(pid) for pid in killed_pids)
        assert set(glusterfs.gluster_processes()) == set(vol.pids())
    assert nothing_left(vol) == []


def run_recorded_cli(trace_dir, *command, user=None):
    """`python3 -m ioassess run --trace-dir trace_dir -- command` (the checkout's, from /)."""
    argv = [sys.executable, "-m", "ioassess", "run", "--trace-dir", str(trace_dir), "--", *map(str, command)]
    result = subprocess.run(argv, cwd="/", capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, describe(result)
    return result


def test_files_on_the_mount_are_of_type_fuse_glusterfs_at_its_mount_point(glusterfs_volume, tmp_path):
    data = glusterfs_volume.mount / "dd.dat"
    run_recorded_cli(tmp_path / "write", "dd", "if=/dev/zero", f"of={data}", "bs=1M", "count=8", "conv=fsync")
    run_recorded_cli(tmp_path / "read", "dd", f"if={data}", "of=/dev/null", "bs=1M")
    for trace_dir, direction in (("write", WRITE), ("read", READ)):
        job = load_job([str(tmp_path / trace_dir)])
        (index,) = [i for i, f in enumerate(job.files) if f.name == str(data)]
        assert job.files[index].fs_type == "fuse.glusterfs"
        assert job.files[index].mount_point == str(glusterfs_volume.mount)
        assert (str(glusterfs_volume.mount), "fuse.glusterfs") in job.mounts
        moved = job.ops["result"][(job.ops["file"] == index) & (job.ops["direction"] == direction)].sum()
        assert moved == 8 << 20


def test_traces_written_on_the_mount_are_read_whole(glusterfs_volume, tmp_path):
    """Trace files on the mount (st_blksize 128 KiB: the reader's buffer is larger than a page)
    read as the same trace written on a local file system."""
    data = tmp_path / "data"
    data.write_bytes(b"x" * PAGE)
    command = (prog("pagecache"), "read", data, 1, 3000, 0)
    on_mount, local = glusterfs_volume.mount / "traces", tmp_path / "traces"
    run_recorded_cli(on_mount, *command)
    run_recorded_cli(local, *command)
    assert os.stat(next(on_mount.glob("*.iot"))).st_blksize > PAGE
    remote, here = load(on_mount), load(local)
    assert len(remote.ops["op"]) == len(here.ops["op"]) >= 3000
    for column in ("op", "requested", "offset", "result"):
        assert np.array_equal(remote.ops[column], here.ops[column]), column


def resident_pages(path, evict=False):
    """Pages of path in this machine's page cache by mincore(2) on a fresh mapping (the workload
    generator's --resident); evict: after --evict (written back, then POSIX_FADV_DONTNEED)."""
    out = subprocess.run([workload_program_path(), "--evict" if evict else "--resident", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split("resident_pages=")[1].split()[0])


def sampled_preads(trace_dir, path):
    ts = load(trace_dir)
    mask = select(ts, path=path) & (ts.ops["op"] == OP_CODES["pread"]) & (ts.ops["pc_pages"] >= 0)
    return {name: column[mask] for name, column in ts.ops.items()}


def test_reads_after_dontneed_on_the_mount_are_sampled_not_cached_and_a_reread_cached(glusterfs_volume, tmp_path):
    vol = glusterfs_volume
    data = vol.mount / "fadvise.dat"
    with open(data, "wb") as f:
        f.write(os.urandom(16 << 20))
        os.fsync(f.fileno())
    # DONTNEED on the mount's file empties this kernel's cache of it; the server's copy (the
    # brick's file, in the server's page cache) stays: the state that reads from the server's
    # memory over FUSE are in
    assert resident_pages(data, evict=True) == 0
    assert resident_pages(vol.brick / data.name) == (16 << 20) // PAGE
    # 4 KiB every MiB, each on a fresh descriptor: read-ahead never reaches the next op's page
    run_recorded_cli(tmp_path / "uncached", prog("pagecache"), "read", data, PAGE, 16, 1 << 20)
    ops = sampled_preads(tmp_path / "uncached", data)
    assert len(ops["op"]) >= FIRST_OPS_SAMPLED
    assert set(ops["pc_pages"].tolist()) == {1} and set(ops["pc_cached"].tolist()) == {0}
    assert resident_pages(data) > 0
    run_recorded_cli(tmp_path / "cached", prog("pagecache"), "read", data, PAGE, 16, 1 << 20)
    ops = sampled_preads(tmp_path / "cached", data)
    assert len(ops["op"]) >= FIRST_OPS_SAMPLED
    assert set(ops["pc_cached"].tolist()) == {1}


def test_a_remount_keeps_the_volume_and_its_files(glusterfs_volume):
    vol = glusterfs_volume
    (vol.mount / "kept").write_text("kept")
    client = {pid for pid, cmdline in vol.pids().items() if cmdline.endswith(str(vol.mount))}
    vol.remount()
    assert glusterfs.mount_type(vol.mount) == "fuse.glusterfs"
    assert (vol.mount / "kept").read_text() == "kept"
    # a new FUSE client, its caches empty
    assert not any(glusterfs.running(pid) for pid in client)
    assert any(cmdline.endswith(str(vol.mount)) for cmdline in vol.pids().values())


@pytest.mark.slow
def test_an_unprivileged_user_calibrates_a_model_of_the_glusterfs_mount(glusterfs_volume, job_user):
    vol = glusterfs_volume
    base = pathlib.Path(tempfile.mkdtemp(prefix="ioassess-calibrate-gluster-", dir="/tmp"))
    os.chmod(base, 0o755)
    work_dir, data_home = vol.mount / "calibrate", base / "data"
    for directory in (work_dir, data_home):
        directory.mkdir()
        os.chown(directory, job_user.pw_uid, job_user.pw_gid)
    argv, env = _installed_cli(["calibrate", "--dir", work_dir], {"HOME": str(base), "XDG_DATA_HOME": str(data_home)})
    try:
        with reachable_installation():
            result = subprocess.run(argv, cwd="/", env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                                    user=job_user.pw_uid, group=job_user.pw_gid, extra_groups=[])
        assert result.returncode == 0, describe(result)
        (path,) = (data_home / "ioassess" / "models").iterdir()
        provenance = load_model(str(path)).provenance
        host = platform.node()
        assert provenance["file_system"]["type"] == "fuse.glusterfs"
        assert provenance["file_system"]["mount"] == str(vol.mount)
        assert provenance["file_system"]["source"] == f"{vol.host}:/{vol.name}"
        assert provenance["host"] == host and provenance["host_class"] == host_class(host)
        # the uncached state is the server's memory over FUSE: the eviction says what it left
        assert provenance["generator"]["eviction"] == "posix_fadvise DONTNEED"
        server_memory = "the GlusterFS servers' memory (the bricks' page cache): not evictable by this user"
        assert server_memory in provenance["generator"]["not_evicted"]
        assert server_memory in load_model(str(path)).description
        assert path.name == f"{host}-fuse.glusterfs-{str(vol.mount).strip('/').replace('/', '-')}.json"
        assert os.stat(path).st_uid == job_user.pw_uid
        assert os.listdir(work_dir) == []
        last = result.stderr.splitlines()[-1]
        assert last.startswith(f"ioassess: wrote {path}: fuse.glusterfs at {vol.mount} on {host}, measured in ")
        assert last.endswith(server_memory)
    finally:
        shutil.rmtree(base)
        shutil.rmtree(work_dir, ignore_errors=True)


TWO_FILE_SYSTEMS_JOB = """
import os, sys
for path in sys.argv[1:]:
    with open(path, "wb") as f:
        f.write(os.urandom(16 << 20))
    buffer = bytearray(64 << 10)
    for _ in range(8):              # each open's first reads are sampled: the file's own cached line
        fd = os.open(path, os.O_RDONLY)
        for offset in range(0, 16 << 20, 64 << 10):
            os.preadv(fd, [buffer], offset)
        os.close(fd)
"""


def test_a_job_on_ext4_and_glusterfs_is_judged_per_file_system(ioassess, glusterfs_volume, tmp_path,
                                                                calibrated_model):
    """Files on the local file system and on the GlusterFS mount in one job, with a model
    calibrated here for the first only: each file system is judged by its own choice, said with
    its reason; the mount, which has no model of its type, takes its time if cached from the
    job's own kernel-confirmed cached reads there (labelled, and the banner says so), never
    another type's model in silence."""
    from test_calibrate import model_dirs_env
    env, _ = model_dirs_env(tmp_path, [calibrated_model.path])
    local, remote = tmp_path / "local.dat", glusterfs_volume.mount / "remote.dat"
    trace_dir = tmp_path / "t"
    result = ioassess("run", "--trace-dir", trace_dir, "--", sys.executable, "-c", TWO_FILE_SYSTEMS_JOB, local, remote,
                      env=env)
    assert result.returncode == 0, result.stderr
    assessment = json.loads((trace_dir / "assessment.json").read_text())
    choice = assessment["model"]["choice"]
    by_type = {facts["type"]: facts for facts in [choice["file_system"], *choice["other_file_systems"]]}
    local_type = mount_type_of(tmp_path)
    assert set(by_type) == {local_type, "fuse.glusterfs"}
    assert by_type[local_type]["model"] == calibrated_model.path.stem
    assert by_type[local_type]["match"] == "host and file system"
    assert by_type["fuse.glusterfs"]["match"] == "none" and by_type["fuse.glusterfs"]["mount"] == str(
        glusterfs_volume.mount)
    assert "fuse.glusterfs" in choice["banner"] and "the job's own cached lines" in choice["banner"]
    default = by_type["fuse.glusterfs"]["model"]
    own = [line for line in assessment["kernel"]["own_cached_lines"] if line["model"] == default]
    assert any(line["direction"] == "read" and line["size_low"] == 64 << 10 and line["ops"] >= 8 * 256 * 0.5
               for line in own), assessment["kernel"]["own_cached_lines"]
    html = (trace_dir / "report.html").read_text()
    assert 'id="model-banner"' in html and 'id="own-cached-lines"' in html
    # the mount's reads the kernel found cached lose nothing; its time if cached is its own
    from ioassess.report.classify import classify_ops
    from ioassess.report.model_choice import choose_model, file_models
    job = load_job([str(trace_dir)])
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        model, path, chosen = choose_model(job)
    per_op = classify_ops(job, model, file_models(job, model, path, chosen))
    names = np.array([f.name for f in job.files])
    on_remote = (names[job.ops["file"]] == str(remote)) & (job.ops["direction"] == READ)
    cached = on_remote & (per_op["judged"] == 0)
    assert np.count_nonzero(cached) >= 0.5 * np.count_nonzero(on_remote)
    assert not per_op["lost_s"][cached].any()
    assert np.count_nonzero(per_op["own_line"] & cached) >= 0.9 * np.count_nonzero(cached)


def mount_type_of(path):
    """The mount table's type of the file system holding path."""
    best, fs_type = "", None
    with open("/proc/mounts") as f:
        for line in f:
            point, kind = line.split()[1:3]
            if str(path).startswith(point.rstrip("/") + "/") and len(point) > len(best):
                best, fs_type = point, kind
    return fs_type
