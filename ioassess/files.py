"""Writing output files so that nothing the user had is lost and nothing partial is left, and
the file system a path is on."""
import configparser
import errno
import os
import shutil
import stat
import tempfile

from .inputs.job import mount_index, mount_of


def replace_atomically(path, text, mode=0o600, group=-1):
    """Write text to path through a temporary file beside it, synced, then renamed over path:
    an interrupted write never leaves a partial file, and an earlier file stays whole until the
    new one is complete. The file gets exactly mode (default 0600: only its owner reads it,
    whatever the umask or the mode of a file it replaces) and, when given, the group gid
    `group`, both set before it appears at path."""
    write_atomically(path, lambda out: out.write(text), mode, group)


def write_atomically(path, write, mode=0o600, group=-1):
    """replace_atomically for what is written piece by piece: write(out) writes it to the text
    file out (or, binary, to out.buffer). A path that names something other than a regular file
    or a symbolic link (a device such as /dev/null, a FIFO, a directory) is refused (OSError
    EEXIST): the rename would put a file in its place."""
    try:
        kind = os.lstat(path).st_mode
    except FileNotFoundError:
        kind = None
    if kind is not None and not (stat.S_ISREG(kind) or stat.S_ISLNK(kind)):
        raise OSError(errno.EEXIST, "not a regular file: an output is written only to a new or regular file", path)
    try:
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                                             prefix=f".{os.path.basename(path)}.", suffix=".part")
    except OSError as error:
        raise _naming(error, path) from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())  # so that a crash after the rename cannot leave an empty file
            os.fchown(out.fileno(), -1, group)
            os.fchmod(out.fileno(), mode)
        os.replace(temporary, path)
    except BaseException as error:
        os.unlink(temporary)
        if isinstance(error, OSError):
            raise _naming(error, path) from None
        raise


def _naming(error, path):
    """The OSError of writing path, named by path: the temporary file beside it is ours, not the
    user's to know of."""
    return OSError(error.errno, error.strerror, path)


def file_system_of(path):
    """(type, mount point) of the file system holding path, from /proc/self/mounts; ("unknown",
    "/") if that cannot be read."""
    facts = file_system_facts(path)
    return facts["type"], facts["mount"]


def file_system_facts(path):
    """{"type", "mount", "source"[, "device_number"]} of the file system holding path: its type,
    mount point and what is mounted there (a device, a server's export) from /proc/self/mounts
    ("unknown", "/", "unknown" if that cannot be read), and path's st_dev as MAJOR:MINOR (left
    out if path cannot be stat'ed)."""
    facts = {"type": "unknown", "mount": "/", "source": "unknown"}
    try:
        status = os.stat(path)
        facts["device_number"] = f"{os.major(status.st_dev)}:{os.minor(status.st_dev)}"
    except OSError:
        pass
    table = mounts_with_sources()
    mount_point, fs_type = mount_of(os.path.realpath(path), mount_index(entry[:2] for entry in table))
    if mount_point:
        source = next(entry[2] for entry in table if entry[:2] == (mount_point, fs_type))
        facts.update(type=fs_type, mount=mount_point, source=source)
    return facts


def mount_table():
    """[(mount point, fs type)] of this host, longest mount point first (as mount_of wants); of
    one mount point mounted twice, the later (visible) mount first; [] if it cannot be read."""
    return [entry[:2] for entry in mounts_with_sources()]


def mounts_with_sources():
    """mount_table's entries with what is mounted there (a device, a server's export) third."""
    try:
        with open("/proc/self/mounts") as mounts:
            table = [(fields[1].replace("\\040", " "), fields[2], fields[0].replace("\\040", " "))
                     for fields in map(str.split, mounts)]
    except OSError:
        return []
    return sorted(reversed(table), key=lambda entry: -len(entry[0]))


def work_dir_problem(directory, needed_bytes, needed_for):
    """Why directory cannot take needed_bytes of work files (one line naming it), or None: it
    is missing, not writable, or has too little free space."""
    if not os.path.isdir(directory):
        return f"{directory}: not a directory"
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".ioassess-probe-"):
            pass
    except OSError as error:
        return f"{directory}: not writable ({error.strerror})"
    free = shutil.disk_usage(directory).free
    if free < needed_bytes:
        return f"{directory}: needs {needed_bytes / 2**30:.1f} GiB free for {needed_for}, has {free / 2**30:.1f} GiB"
    return None


def read_settings_file(path):
    """The configparser of a settings file (no % interpolation: templates use %). Raises
    ValueError with one line, `PATH: problem`, for a file that cannot be read or parsed."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except OSError as error:
        raise ValueError(f"{path}: cannot read the settings: {error.strerror}") from None
    except (configparser.Error, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a settings file: {' '.join(str(error).split())}") from None
    return parser
