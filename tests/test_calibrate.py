"""`ioassess calibrate` as users run it: the model it writes (made once per session by
conftest's calibrated_model, as an unprivileged user), what it leaves behind when a real signal
stops it, and its refusals; then the report choosing a model by provenance, for traces of a
job on this machine and for PyDarshan's example logs of Lustre and NFS jobs."""
import datetime
import json
import os
import pathlib
import platform
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import markupsafe
import numpy as np
import pytest

from ioassess.inputs.load import load_job
from ioassess.models.modelfile import DEFAULT_MODEL, PRETRAINED_DIR, load_model
from ioassess.report.classify import classify_ops, estimate_totals, estimate_totals_of
from ioassess.report.model_choice import choose_model, file_models
from ioassess.report.passes import chunks_of, run_passes
from ioassess.report.sections import Flushes
from recorder_helpers import shipped_darshan_logs, tool
from test_darshan_log import darshan_util, rewrite  # noqa: F401

pytestmark = pytest.mark.root

KiB = 1 << 10
# A state the test waits for may take this long on a loaded machine.
STATE_TIMEOUT_S = 60


def read_json(path):
    with open(path) as f:
        return json.load(f)


def escaped(text):
    return str(markupsafe.escape(text))


def mount_facts(directory):
    """(type, mount point, source) of directory's file system as findmnt (util-linux) says."""
    out = subprocess.run([tool("findmnt"), "--noheadings", "--output", "FSTYPE,TARGET,SOURCE", "--target",
                          str(directory)], capture_output=True, text=True, check=True).stdout
    return tuple(out.split())


def test_an_unprivileged_user_calibrates_a_model_of_this_host_and_file_system(calibrated_model):
    model, run = load_model(str(calibrated_model.path)), calibrated_model.result
    fs_type, mount, source = mount_facts(calibrated_model.work_dir)
    device = os.stat(calibrated_model.work_dir).st_dev
    host = platform.node()
    provenance = model.provenance
    assert (provenance["source"], provenance["host"], provenance["kernel"], provenance["profile"]) == \
        ("calibrated by ioassess calibrate", host, platform.release(), "calibrate")
    assert provenance["file_system"] == {"type": fs_type, "mount": mount, "source": source,
                                         "device_number": f"{os.major(device)}:{os.minor(device)}"}
    assert provenance["generator"]["eviction"] == "posix_fadvise DONTNEED"
    made = datetime.datetime.strptime(provenance["date"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    assert calibrated_model.started - 1 <= made <= calibrated_model.ended + 1
    # the name says host and file system; the file is the user's, in the user's model directory
    assert calibrated_model.path.name == f"{host}-{fs_type}-{mount.strip('/').replace('/', '-') or 'root'}.json"
    status = calibrated_model.path.stat()
    assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (calibrated_model.user.pw_uid, 0o644)
    # every line of the shipped default, so that it can replace it, and those of buffers off the
    # cache line; nothing left in --dir, nor of the runs' traces in the temporary directory
    assert model.lines.keys() >= load_model(DEFAULT_MODEL).lines.keys()
    assert {layout for _, _, layout in model.lines} == {"off0", "rnd", "off0-unaligned", "rnd-unaligned"}
    assert os.listdir(calibrated_model.work_dir) == [] and os.listdir(calibrated_model.tmp_dir) == []
    last = run.stderr.splitlines()[-1]
    assert last.startswith(f"ioassess: wrote {calibrated_model.path}: {fs_type} at {mount} on {host}, measured in ")


def test_calibrated_classes_are_ordered_at_64_kib(calibrated_model):
    """Reads: memory speed < page cache < storage. Writes: memory speed < page cache; a write of
    whole pages into an uncached file reads nothing, so it is no slower than a cached one."""
    lines = load_model(str(calibrated_model.path)).lines
    for layout in ("off0", "rnd"):
        read = [float(lines[("read", cls, layout)].typical.predict(64 * KiB))
                for cls in ("memcpy", "cached", "uncached")]
        assert read == sorted(read) and len(set(read)) == 3, (layout, read)
        write = [float(lines[("write", cls, layout)].typical.predict(64 * KiB)) for cls in ("memcpy", "cached")]
        assert write[0] < write[1], (layout, write)


def wait_for(condition, what):
    deadline = time.monotonic() + STATE_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {STATE_TIMEOUT_S} s"
        time.sleep(0.01)


@pytest.mark.parametrize("signum, stage", [(signal.SIGINT, "its work directory is made"),
                                           (signal.SIGTERM, "it measures")])
def test_a_signal_leaves_no_model_and_no_calibration_files(start_ioassess, tmp_path, signum, stage):
    work, models, traces = tmp_path / "work", tmp_path / "models", tmp_path / "tmp"
    work.mkdir()
    traces.mkdir()
    process = start_ioassess("calibrate", "--dir", work, "--out", models / "m.json", env={"TMPDIR": str(traces)})
    if stage == "it measures":
        # a run's trace, in the temporary directory (the data file is in DIR, beside which may
        # stand a file checking that DIR is writable)
        wait_for(lambda: any(traces.glob("ioassess-calibrate-traces-*/trace-*")), "run of the workload")
    else:
        wait_for(lambda: any(path.name.startswith("ioassess-calibrate-") for path in work.iterdir()), "work directory")
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=STATE_TIMEOUT_S)
    assert process.returncode == 130
    assert stderr.splitlines()[-1] == \
        "ioassess: calibration interrupted; its files were removed and no model was written"
    assert os.listdir(work) == [] and os.listdir(models) == [] and os.listdir(traces) == []


@pytest.mark.parametrize("kind", ["missing", "a file", "not writable"])
def test_a_bad_dir_is_one_line_and_exit_2(ioassess, searchable_tmp, job_user, installation_reachable, kind):
    directory = searchable_tmp / "dir"
    problem = {"missing": "not a directory", "a file": "not a directory",
               "not writable": "not writable (Permission denied)"}[kind]
    if kind == "a file":
        directory.write_text("")
    elif kind == "not writable":
        directory.mkdir()
    home = searchable_tmp / "home"
    home.mkdir()
    os.chown(home, job_user.pw_uid, job_user.pw_gid)
    result = ioassess("calibrate", "--dir", directory, env={"HOME": str(home)}, user=job_user.pw_uid,
                      group=job_user.pw_gid, extra_groups=[])
    assert result.returncode == 2 and result.stderr == f"ioassess: {directory}: {problem}\n"
    assert not any(home.iterdir())


def test_a_site_model_directory_the_user_cannot_write_is_refused_before_measuring(ioassess, searchable_tmp, job_user,
                                                                                 installation_reachable):
    """--site writes into $IOASSESS_SITE_MODELS (else the epilog config's site_models, else
    /etc/ioassess/models): root's, so a user's calibration stops at once with one line."""
    work, site_models = searchable_tmp / "work", searchable_tmp / "site-models"
    work.mkdir()
    os.chown(work, job_user.pw_uid, job_user.pw_gid)
    site_models.mkdir()
    result = ioassess("calibrate", "--dir", work, "--site", env={"IOASSESS_SITE_MODELS": str(site_models)},
                      user=job_user.pw_uid, group=job_user.pw_gid, extra_groups=[])
    assert result.returncode == 2
    assert result.stderr == f"ioassess: {site_models}: cannot write the model there (not writable)\n"
    assert os.listdir(work) == [] and os.listdir(site_models) == []


# ---- the report's choice of model ----

def report_of_reads(ioassess, tmp_path, env):
    """The assessment of a job reading a file under tmp_path (made if needed), reported with
    the model directories of env."""
    tmp_path.mkdir(exist_ok=True)
    data = tmp_path / "data"
    data.write_bytes(os.urandom(1 << 20))
    ran = ioassess("run", "--trace-dir", tmp_path / "t", "--", "dd", f"if={data}", "of=/dev/null", "bs=64k", env=env)
    assert ran.returncode == 0 and (tmp_path / "t" / "assessment.json").exists(), ran.stderr
    return read_json(tmp_path / "t" / "assessment.json"), (tmp_path / "t" / "report.html").read_text()


def model_dirs_env(tmp_path, user_models=()):
    """XDG_DATA_HOME with copies of user_models, and an empty site model directory."""
    models = tmp_path / "xdg" / "ioassess" / "models"
    models.mkdir(parents=True)
    (tmp_path / "site").mkdir()
    for path in user_models:
        shutil.copy(path, models)
    return {"XDG_DATA_HOME": str(tmp_path / "xdg"), "IOASSESS_SITE_MODELS": str(tmp_path / "site")}, models


def test_a_job_here_is_judged_by_the_model_calibrated_here(ioassess, tmp_path, calibrated_model):
    env, _ = model_dirs_env(tmp_path, [calibrated_model.path])
    assessment, html = report_of_reads(ioassess, tmp_path, env)
    model = load_model(str(calibrated_model.path))
    choice = assessment["model"]["choice"]
    assert assessment["model"]["name"] == calibrated_model.path.stem
    fs_type, mount, _ = mount_facts(tmp_path)
    assert choice["match"] == "host and file system" and choice["banner"] is None
    assert choice["reason"] == (f"calibrated by ioassess calibrate on {platform.node()}, where the job ran, for "
                                f"{fs_type} at {mount} on {model.provenance['date']}")
    assert choice["file_system"]["type"] == fs_type and choice["file_system"]["share"] == 1.0
    assert escaped(choice["reason"]) in html and 'id="model-banner"' not in html


def test_another_users_model_is_not_used(ioassess, tmp_path, calibrated_model, job_user):
    """A model in your directory that someone else wrote does not judge your jobs: the shipped
    model of the type does, and the report says that its times are another machine's."""
    env, models = model_dirs_env(tmp_path, [calibrated_model.path])
    planted = models / calibrated_model.path.name
    os.chown(planted, job_user.pw_uid, job_user.pw_gid)
    assessment, html = report_of_reads(ioassess, tmp_path, env)
    choice = assessment["model"]["choice"]
    assert assessment["model"]["name"] == DEFAULT_MODEL and choice["match"] == "shipped for the type"
    assert choice["not_used"] == [f"{planted}: belongs to uid {job_user.pw_uid}, not to you or root: not used"]
    assert choice["reason"].startswith(
        f"no model for ext4 made on {platform.node()}: the shipped model {DEFAULT_MODEL} ")
    assert choice["reason"].endswith("its times are another machine's (`ioassess calibrate` makes a model of this one)")
    assert escaped(choice["reason"]) in html


def test_a_model_of_a_host_of_the_same_class_comes_after_the_one_of_the_jobs_host(ioassess, tmp_path,
                                                                                  calibrated_model):
    """A site's model made on another node of the cluster (here: the host's name in another
    domain) is chosen for the job; the user's own model of this host comes first."""
    env, users = model_dirs_env(tmp_path)
    other_node = json.loads(calibrated_model.path.read_text())
    other_node["provenance"]["host"] = f"{platform.node()}.elsewhere.example"
    (tmp_path / "site" / "other-node.json").write_text(json.dumps(other_node))
    assessment, _ = report_of_reads(ioassess, tmp_path / "first", env)
    choice = assessment["model"]["choice"]
    assert assessment["model"]["source"] == str(tmp_path / "site" / "other-node.json")
    assert choice["match"] == "host class"
    # (and, where the job's files are on the mount point the model was made on, says so too)
    assert choice["reason"].startswith(f"calibrated by ioassess calibrate on {platform.node()}.elsewhere.example "
                                       "(a host like the job's")
    shutil.copy(calibrated_model.path, users)
    assessment, _ = report_of_reads(ioassess, tmp_path / "second", env)
    assert (assessment["model"]["source"], assessment["model"]["choice"]["match"]) == \
        (str(users / calibrated_model.path.name), "host and file system")


def test_a_job_on_tmpfs_gets_the_local_default_with_its_caveat(ioassess, tmp_path, calibrated_model):
    """The model calibrated on ext4 is not tmpfs's; the shipped default stands for local file
    systems, and the report says that its times are another machine's, under the banner of a
    model of another file-system type."""
    env, _ = model_dirs_env(tmp_path, [calibrated_model.path])
    shm = pathlib.Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        (shm / "data").write_bytes(os.urandom(1 << 20))
        ran = ioassess("run", "--trace-dir", tmp_path / "t", "--", "dd", f"if={shm / 'data'}", "of=/dev/null",
                       "bs=64k", env={**env, "IOASSESS_EXCLUDE": "none"})   # /dev is not recorded by default
    finally:
        shutil.rmtree(shm)
    assert ran.returncode == 0, ran.stderr
    choice = read_json(tmp_path / "t" / "assessment.json")["model"]["choice"]
    assert (choice["match"], choice["file_system"]["type"]) == ("local default", "tmpfs")
    assert choice["banner"].startswith(f"The cause model {DEFAULT_MODEL} was made for ext4, but ")
    assert choice["reason"].startswith(f"no model for tmpfs made on {platform.node()}: the shipped default "
                                       f"{DEFAULT_MODEL} (ext4 on ")
    assert "is used for this local file system; its times are another machine's" in choice["reason"]


def darshan_log(name):
    return next(path for path in shipped_darshan_logs() if os.path.basename(path) == name)


def report_json(ioassess, tmp_path, log, *options):
    env, _ = model_dirs_env(tmp_path)
    result = ioassess("report", log, "-o", tmp_path / "r.html", "--json", tmp_path / "a.json", *options, env=env)
    assert result.returncode == 0, result.stderr
    return read_json(tmp_path / "a.json"), (tmp_path / "r.html").read_text()


def test_a_lustre_job_is_judged_by_the_lustre_model_with_its_caveat(ioassess, tmp_path):
    """PyDarshan's ior_hdf5_example.darshan: IOR on Lustre (/global/cscratch1), DXT on nid00097."""
    assessment, html = report_json(ioassess, tmp_path, darshan_log("ior_hdf5_example.darshan"))
    choice = assessment["model"]["choice"]
    assert assessment["model"]["name"] == "mistral-lustre-2015" and choice["match"] == "shipped for the type"
    assert choice["file_system"]["type"] == "lustre" and choice["banner"] is None
    assert choice["reason"] == (
        "no model for lustre made on nid00097: the shipped model mistral-lustre-2015 (lustre on mistral (DKRZ), "
        "2015; transcribed from Kunkel 2015, Table 3) is used; its times are another machine's (`ioassess "
        "calibrate` makes a model of this one)")
    assert escaped(choice["reason"]) in html and assessment["tier"] in ("ops", "mixed")


def test_the_local_model_is_never_applied_to_nfs_without_a_banner(ioassess, tmp_path):
    """PyDarshan's sample-dxt-simple.darshan wrote to NFS: no model of NFS is installed, so the
    default judges it, under a banner that says it is not that file system's."""
    assessment, html = report_json(ioassess, tmp_path, darshan_log("sample-dxt-simple.darshan"))
    choice = assessment["model"]["choice"]
    assert assessment["model"]["name"] == DEFAULT_MODEL and choice["match"] == "none"
    assert choice["file_system"]["type"] == "nfs"
    assert choice["reason"].startswith(f"no model for nfs: the shipped default {DEFAULT_MODEL} (ext4 on ")
    assert choice["reason"].endswith(" is used, but it is not a model of nfs")
    assert choice["banner"].startswith(f"The cause model {DEFAULT_MODEL} was made for ext4, but ")
    assert "of this job's I/O time went to nfs at " in choice["banner"]
    assert f'<p class="warning" id="model-banner">{escaped(choice["banner"])}</p>' in html


def test_a_model_given_for_another_file_system_type_gets_the_banner(ioassess, tmp_path):
    assessment, html = report_json(ioassess, tmp_path, darshan_log("ior_hdf5_example.darshan"), "--model",
                                   DEFAULT_MODEL)
    choice = assessment["model"]["choice"]
    assert choice["match"] == "given" and choice["reason"].startswith("given: ")
    assert choice["banner"].startswith(f"The cause model {DEFAULT_MODEL} was made for ext4, but 100% of this "
                                       "job's I/O time went to lustre at /global/cscratch1:")
    assert escaped(choice["banner"]) in html


def test_lustre_files_under_a_containers_overlay_root_are_judged_by_the_lustre_model(ioassess, tmp_path, rewrite):  # noqa: F811
    """sample-badost.darshan with a container's mount table, only "/" as overlay: its 2,048
    LUSTRE records say where its I/O went, so Lustre (at the directory its files share) is the
    main file system and the shipped Lustre model judges it; the one file the records do not
    name stays on the overlay, judged by the local default under a banner of its own."""
    log = rewrite("sample-badost.darshan", mounts=[(b"/", b"overlay")])
    assessment, html = report_json(ioassess, tmp_path, log)
    choice = assessment["model"]["choice"]
    assert assessment["model"]["name"] == "mistral-lustre-2015" and choice["match"] == "shipped for the type"
    main, = [choice["file_system"]]
    assert (main["type"], main["mount"], main["model"]) == \
        ("lustre", "/scratch1/scratchdirs/glock/test-scratch1", "mistral-lustre-2015")
    assert main["share"] > 0.99
    (overlay,) = choice["other_file_systems"]
    assert (overlay["type"], overlay["mount"], overlay["model"], overlay["match"]) == \
        ("overlay", "/", DEFAULT_MODEL, "local default")
    assert choice["banner"].startswith(f"The cause model {DEFAULT_MODEL} was made for ext4, but less than 1% of "
                                       "this job's I/O time went to overlay at /:")
    assert "went to lustre" not in choice["banner"]
    assert 'id="file-system-models"' in html and escaped(main["reason"]) in html


def test_each_sync_is_judged_by_its_file_s_model(ioassess, tmp_path):
    """A traced job that syncs a large write to one file and small writes three times to
    another: with each file judged by another model (the shipped one, and a copy whose flushes
    take twice as long), each sync's typical and fixed time are those of its own file's model:
    the two ways round sum to both models judging everything."""
    script = ("import os\n"
              f"for name, size, syncs in (('a', 1 << 20, 1), ('b', 4096, 3)):\n"
              f"    fd = os.open({str(tmp_path)!r} + '/' + name, os.O_WRONLY | os.O_CREAT, 0o600)\n"
              "    for _ in range(syncs):\n"
              "        os.write(fd, os.urandom(size)); os.fsync(fd)\n"
              "    os.close(fd)\n")
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", sys.executable, "-c", script)
    assert result.returncode == 0, result.stderr
    job = load_job([str(tmp_path / "t")])
    with open(os.path.join(PRETRAINED_DIR, f"{DEFAULT_MODEL}.json")) as f:
        slower = json.load(f)
    for line in slower["lines"]:
        if line["op"] == "sync":
            for part in ("typical", "bound"):
                for size in line[part].values():
                    size.update(intercept_s=2 * size["intercept_s"], slope_s_per_byte=2 * size["slope_s_per_byte"])
    slower["name"] = "slower-flushes"
    (tmp_path / "slower.json").write_text(json.dumps(slower))
    models = [load_model(os.path.join(PRETRAINED_DIR, f"{DEFAULT_MODEL}.json")), load_model(tmp_path / "slower.json")]
    on_a = np.array([os.path.basename(f.name) == "a" for f in job.files])
    assert on_a.sum() == 1 and sum(os.path.basename(f.name) == "b" for f in job.files) == 1

    def judged(of_file):
        passes = run_passes({"flushes": Flushes(job, (models, of_file.astype(np.int64)))}, chunks_of(job))
        return passes["flushes"].result()
    both = [judged(np.where(on_a, 0, 1)), judged(np.where(on_a, 1, 0))]
    alone = [judged(np.zeros(len(job.files))), judged(np.ones(len(job.files)))]
    assert all(r["syncs"] == 4 for r in both + alone)
    for name in ("typical_s", "fixed_s"):
        assert alone[0][name] < both[0][name] < alone[1][name] and alone[0][name] < both[1][name] < alone[1][name]
        assert both[0][name] + both[1][name] == pytest.approx(alone[0][name] + alone[1][name], rel=1e-12)


def test_each_file_system_of_a_job_is_judged_by_its_own_model(tmp_path, rewrite):  # noqa: F811
    """sample-dxt-simple.darshan (DXT ops and counters) with /yellow on Lustre and "/" on ext4:
    the Lustre files' ops and totals rows are judged by the shipped Lustre model, the ext4
    file's by the shipped ext4 one, each exactly as that model alone judges them."""
    log = rewrite("sample-dxt-simple.darshan", mounts=[(b"/", b"ext4"), (b"/yellow", b"lustre")])
    job = load_job([log])
    dirs = [("user", str(tmp_path / "user")), ("site", str(tmp_path / "site")), ("shipped", PRETRAINED_DIR)]
    model, path, choice = choose_model(job, dirs)
    judged = {(fs["type"], fs["mount"]): (fs["model"], fs["match"])
              for fs in [choice["file_system"], *choice["other_file_systems"]]}
    assert judged == {("lustre", "/yellow"): ("mistral-lustre-2015", "shipped for the type"),
                      ("ext4", "/"): (DEFAULT_MODEL, "shipped for the type")}
    assert choice["banner"] is None
    models, of_file = file_models(job, model, path, choice)
    assert [m.name for m in models] == [model.name, *{"mistral-lustre-2015", DEFAULT_MODEL} - {model.name}]
    on_ext4 = np.array([f.fs_type == "ext4" for f in job.files])
    assert on_ext4.any() and (~on_ext4).any()
    per_op, per_total = classify_ops(job, model, (models, of_file)), estimate_totals(job, model, (models, of_file))
    for own in models:
        mine = np.array([models[i].name == own.name for i in of_file])
        alone_op, alone_total = classify_ops(job, own), estimate_totals_of(job, own)
        ops, rows = mine[job.ops["file"]], mine[job.totals["file"]]
        assert ops.any() and rows.any()
        for name in ("class", "cached_typical_s", "lost_s"):
            assert np.array_equal(per_op[name][ops], alone_op[name][ops], equal_nan=True)
        assert np.array_equal(per_op["modelled"][ops], alone_op["modelled"][ops])
        for name, column in alone_total.items():
            assert np.array_equal(per_total[name][rows], column[rows])
