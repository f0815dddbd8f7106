"""Writing output files so that nothing the user had is lost and nothing partial is left, and
the file system a path is on."""
import configparser
import os
import shutil
import tempfile

from .job import mount_of


def replace_atomically(path, text, mode=0o600, group=-1):
    """Write text to path through a temporary file beside it, synced, then renamed over path:
    an interrupted write never leaves a partial file, and an earlier file stays whole until the
    new one is complete. The file gets exactly mode (default 0600: only its owner reads it,
    whatever the umask or the mode of a file it replaces) and, when given, the group gid
    `group`, both set before it appears at path."""
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                                         prefix=f".{os.path.basename(path)}.", suffix=".part")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())  # so that a crash after the rename cannot leave an empty file
            os.fchown(out.fileno(), -1, group)
            os.fchmod(out.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def file_system_of(path):
    """(type, mount point) of the file system holding path, from /proc/self/mounts; ("unknown",
    "/") if that cannot be read."""
    mount_point, fs_type = mount_of(os.path.realpath(path), mount_table())
    return (fs_type, mount_point) if mount_point else ("unknown", "/")


def mount_table():
    """[(mount point, fs type)] of this host, longest mount point first (as mount_of wants); of
    one mount point mounted twice, the later (visible) mount first; [] if it cannot be read."""
    try:
        with open("/proc/self/mounts") as mounts:
            table = [(fields[1].replace("\\040", " "), fields[2]) for fields in map(str.split, mounts)]
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
