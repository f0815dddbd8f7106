"""A GlusterFS volume of one brick, served and mounted on this machine over loopback, for the
tests (conftest.py's glusterfs_volume fixture, tests/test_glusterfs.py) and the bench
(bench/glusterfs_states.py, which puts tests/ on sys.path as bench/overhead.py does for
darshan_runtime.py):

    with glusterfs.volume() as vol:
        vol.mount        # the FUSE mount point (fuse.glusterfs in /proc/mounts)
        vol.name         # the volume's name, unique per volume
        vol.brick        # the brick's directory (where the server keeps the files)
        vol.gluster("volume", "set", vol.name, "performance.io-cache", "on")

Root only (it starts daemons and mounts). The Debian packages (glusterfs-server for glusterd,
glusterfs-client for the FUSE client; the Makefile's DEBIAN_TOOLS) are installed with apt-get
when missing. No systemd: glusterd is started by hand with a volume file of its own that gives
it a private working directory (the volume definitions /var/lib/glusterd would hold), run
directory (its CLI socket and the brick's pid file), log directory and CLI socket, all in one
directory /tmp/ioassess-glusterfs-XXXX (the volume's base) with the brick and the mount point.
The port stays 24007 and cannot be another: the brick process asks glusterd for its volume file
there whatever glusterd listens on. So one such volume is up at a time on a machine, and none
while another glusterd runs (volume() fails with the reason).

Leftovers of a run that was killed before its teardown (its base has an owner pid file naming a
process that is gone): their mount is lazily unmounted, their processes (any whose command line
names that base, glusterd, the brick glusterfsd and the FUSE client glusterfs) are ended by pid
and the base is removed, before a new volume is made.

Teardown, also after an exception in the with block: unmount (umount -l if busy) and the FUSE
client ended; `volume stop` and `volume delete`; glusterd ended by its pid; any process of ours
still there (by its command line naming the base) ended by pid; the brick's socket (glusterd puts
it in /var/run/gluster whatever its run directory) and the base removed. Processes are waited for
until they are gone (or zombies of PID 1, whose children the daemons are), not slept on.
"""
import contextlib
import dataclasses
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from recorder_helpers import missing_debian_packages

BASE_PREFIX = "ioassess-glusterfs-"
BASE_PARENT = "/tmp"
OWNER = "owner.pid"             # in the base: the pid of the process that made the volume
GLUSTERD_PORT = 24007
# command -> Debian package
PACKAGES = {"glusterd": "glusterfs-server", "gluster": "glusterfs-cli", "mount.glusterfs": "glusterfs-client"}
COMMAND_TIMEOUT_S = 120
WAIT_S = 60                     # for a state: a brick online, a process gone, a mount usable
GLUSTERD_VOL = """\
volume management
    type mgmt/glusterd
    option working-directory {base}/state
    option run-directory {base}/run
    option logging-directory {base}/log
    option glusterd-sockfile {base}/run/glusterd.socket
    option transport-type socket
    option transport.socket.listen-port {port}
    option transport.socket.bind-address 127.0.0.1
    option transport.socket.keepalive-time 10
    option transport.socket.keepalive-interval 2
    option transport.socket.read-fail-log off
    option ping-timeout 0
    option event-threads 1
    option max-port 60999
end-volume
"""


class Unavailable(Exception):
    """GlusterFS cannot be set up here: the one-line reason."""


@dataclasses.dataclass
class Volume:
    name: str
    base: pathlib.Path      # everything of this volume: state/, run/, log/, brick/, mnt/
    host: str               # this machine's name as the volume's brick and clients know it
    brick: pathlib.Path
    mount: pathlib.Path

    @property
    def socket(self):
        return self.base / "run" / "glusterd.socket"

    def gluster(self, *args, check=True):
        """Runs the gluster CLI against this volume's glusterd; its CompletedProcess (text)."""
        argv = ["gluster", "--mode=script", f"--glusterd-sock={self.socket}",
                f"--log-file={self.base / 'log' / 'cli.log'}", *map(str, args)]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        if check and result.returncode != 0:
            raise Unavailable(f"`gluster {' '.join(map(str, args))}` failed: {(result.stdout + result.stderr).strip()}")
        return result

    def pids(self):
        """The running processes of this volume (glusterd, brick, FUSE client): {pid: command line}."""
        return processes_naming(self.base)

    def remount(self):
        """Unmounts and mounts the volume again (the FUSE client restarted: its caches empty)."""
        unmount(self.mount)
        _mount(self)


def ensure_installed():
    """Installs the Debian packages of the missing commands (root, apt-get); Unavailable if it cannot."""
    problem = missing_debian_packages(PACKAGES, "GlusterFS")
    if problem:
        raise Unavailable(problem)


def wait_until(condition, what, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise Unavailable(f"waited {timeout_s} s for {what}")
        time.sleep(0.05)


def _proc_state(pid):
    """The process's state letter from /proc/PID/stat, or None if it is gone."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(")") + 2]


def running(pid):
    """Whether the process is there and not a zombie (the daemons are PID 1's children here,
    which reaps them when it will)."""
    return _proc_state(pid) not in (None, "Z", "X")


def _cmdline(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def all_processes():
    """{pid: command line} of every running process."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and running(int(entry)):
            found[int(entry)] = _cmdline(int(entry))
    return found


def gluster_processes():
    """{pid: command line} of every running GlusterFS daemon or client on the machine (any owner)."""
    found = {}
    for pid, cmdline in all_processes().items():
        try:
            comm = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if comm in ("glusterd", "glusterfsd", "glusterfs"):
            found[pid] = cmdline
    return found


def processes_naming(base):
    """{pid: command line} of the running processes (other than this one) whose command line
    names base."""
    return {pid: cmdline for pid, cmdline in all_processes().items()
            if str(base) in cmdline and pid != os.getpid()}


def end_process(pid, timeout_s=WAIT_S / 2):
    """Ends a process by its pid: SIGTERM, then SIGKILL if it is still running after timeout_s.
    Waits until it is gone."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if not running(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
        deadline = time.monotonic() + timeout_s
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    if running(pid):
        raise Unavailable(f"process {pid} ({_cmdline(pid)}) survived SIGKILL")


def mounts_under(prefix):
    """Mount points in /proc/mounts at or below prefix, deepest first."""
    points = []
    with open("/proc/mounts") as f:
        for line in f:
            point = line.split()[1].replace("\\040", " ")
            if point == str(prefix) or point.startswith(str(prefix).rstrip("/") + "/"):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def mount_type(point):
    """The type /proc/mounts gives the mount point, or None if it is not one."""
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1].replace("\\040", " ") == str(point):
                return fields[2]
    return None


def unmount(point):
    """umount, then umount -l if that fails (busy); waits until the mount is gone and its FUSE
    client has ended."""
    clients = {pid for pid, cmdline in all_processes().items()
               if cmdline.split()[:1] and os.path.basename(cmdline.split()[0]) == "glusterfs"
               and cmdline.endswith(" " + str(point))}
    if mount_type(point) is not None:
        if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)
        wait_until(lambda: mount_type(point) is None, f"{point} to be unmounted")
    for pid in clients:
        with contextlib.suppress(Unavailable):
            wait_until(lambda: not running(pid), f"the FUSE client {pid} to end", timeout_s=10)
        end_process(pid)


def _socket_of(cmdline):
    """The -S socket file of a glusterfsd command line, or None."""
    words = cmdline.split()
    return words[words.index("-S") + 1] if "-S" in words[:-1] else None


def _remove_base(base):
    """Everything a volume of base left: mounts, processes (by pid), the brick's socket, base."""
    for point in mounts_under(base):
        subprocess.run(["umount", "-l", point], capture_output=True)
    for pid, cmdline in processes_naming(base).items():
        sock = _socket_of(cmdline)
        end_process(pid)
        if sock:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sock)
    shutil.rmtree(base, ignore_errors=True)


def clean_leftovers(parent=BASE_PARENT):
    """Removes the volumes of runs that were killed before their teardown: bases whose owner
    pid file names a process that is gone (or that has none: killed while it was made)."""
    for base in pathlib.Path(parent).glob(BASE_PREFIX + "*"):
        try:
            owner = int((base / OWNER).read_text())
        except (FileNotFoundError, ValueError):
            owner = None
        if owner is not None and owner != os.getpid() and running(owner):
            continue
        _remove_base(base)


def _host():
    """This machine's name, which must resolve to a loopback address (glusterd refuses localhost
    and 127.0.0.1 for a brick; the volume's traffic stays on this machine)."""
    host = socket.gethostname()
    try:
        address = socket.gethostbyname(host)
    except OSError as error:
        raise Unavailable(f"this machine's name {host} does not resolve: {error}") from error
    if not address.startswith("127."):
        raise Unavailable(f"this machine's name {host} resolves to {address}, not a loopback address: "
                          "the test volume serves on loopback only")
    return host


def _port_holder():
    """{pid: command line} of the processes listening on glusterd's port, by /proc/net/tcp."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == GLUSTERD_PORT:
                    inodes.add(fields[9])
    holders = {}
    for pid, cmdline in all_processes().items():
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    holders[pid] = cmdline
    return holders, bool(inodes)


def _mount(vol):
    """Mounts the volume with the FUSE client (mount -t glusterfs) and waits until it answers."""
    log = vol.base / "log" / "client.log"
    result = subprocess.run(["mount", "-t", "glusterfs", "-o", f"log-file={log}", f"{vol.host}:/{vol.name}",
                             str(vol.mount)], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if result.returncode != 0 or mount_type(vol.mount) != "fuse.glusterfs":
        tail = log.read_text()[-2000:] if log.exists() else ""
        raise Unavailable(f"mount -t glusterfs failed: {(result.stdout + result.stderr).strip()}\n{tail}")

    def answers():
        try:
            os.statvfs(vol.mount)
            os.listdir(vol.mount)
            return True
        except OSError:
            return False
    wait_until(answers, f"{vol.mount} to answer")


def _brick_online(vol):
    out = vol.gluster("volume", "status", vol.name, "--xml", check=False).stdout
    return "<status>1</status>" in out and "<port>N/A</port>" not in out


@contextlib.contextmanager
def volume(parent=BASE_PARENT):
    """A started one-brick volume mounted with the FUSE client: yields its Volume (see the module
    doc); everything torn down after the with block, whatever happened in it."""
    if os.geteuid() != 0:
        raise Unavailable("a GlusterFS volume needs root (daemons, FUSE mount)")
    ensure_installed()
    host = _host()
    if not os.path.exists("/dev/fuse"):
        subprocess.run(["modprobe", "fuse"], capture_output=True)
    clean_leftovers(parent)
    holders, listening = _port_holder()
    if listening:
        raise Unavailable(f"port {GLUSTERD_PORT} is taken (one volume at a time; stop the other glusterd): "
                          f"{holders or 'a process of another namespace'}")
    base = pathlib.Path(tempfile.mkdtemp(prefix=BASE_PREFIX, dir=parent))
    os.chmod(base, 0o755)                        # other users reach the mount point
    (base / OWNER).write_text(str(os.getpid()))
    vol = Volume(name=f"ioassess-{os.getpid()}-{secrets.token_hex(4)}", base=base, host=host,
                 brick=base / "brick", mount=base / "mnt")
    glusterd_pid = None
    try:
        for sub in ("state", "run", "log", "brick", "mnt"):
            (base / sub).mkdir()
        (base / "glusterd.vol").write_text(GLUSTERD_VOL.format(base=base, port=GLUSTERD_PORT))
        pid_file = base / "run" / "glusterd.pid"
        result = subprocess.run(["glusterd", "-f", str(base / "glusterd.vol"), "-p", str(pid_file),
                                 "-l", str(base / "log" / "glusterd.log")],
                                capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        if result.returncode != 0:
            raise Unavailable(f"glusterd did not start: {(result.stdout + result.stderr).strip()}")
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() and vol.socket.exists(),
                   "glusterd's pid file and socket")
        glusterd_pid = int(pid_file.read_text())
        wait_until(lambda: vol.gluster("volume", "list", check=False).returncode == 0, "glusterd to answer")
        vol.gluster("volume", "create", vol.name, f"{host}:{vol.brick}", "force")
        vol.gluster("volume", "start", vol.name)
        wait_until(lambda: _brick_online(vol), f"the brick of {vol.name} to be online")
        _mount(vol)
        os.chmod(vol.mount, 0o1777)              # like /tmp: every user may make files there
        yield vol
    finally:
        _teardown(vol, glusterd_pid)


def _teardown(vol, glusterd_pid):
    problems = []
    sockets = {sock for sock in map(_socket_of, vol.pids().values()) if sock}
    try:
        unmount(vol.mount)
    except Unavailable as error:
        problems.append(str(error))
    if glusterd_pid is not None and running(glusterd_pid):
        for args in (("volume", "stop", vol.name, "force"), ("volume", "delete", vol.name)):
            result = vol.gluster(*args, check=False)
            if result.returncode != 0 and "does not exist" not in result.stdout + result.stderr:
                problems.append(f"gluster {' '.join(args)}: {(result.stdout + result.stderr).strip()}")
        end_process(glusterd_pid)
    _remove_base(vol.base)
    for sock in sockets:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock)
    if problems:
        print(f"glusterfs teardown of {vol.name}: {'; '.join(problems)}", file=sys.stderr)
