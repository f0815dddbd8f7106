"""Writing output files so that nothing the user had is lost and nothing partial is left."""
import os
import tempfile


def replace_atomically(path, text, mode=None):
    """Write text to path through a temporary file beside it, synced, then renamed over path:
    an interrupted write never leaves a partial file, and an earlier file stays whole until the
    new one is complete. mode: the file's permissions (default: 0666 less the umask)."""
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                                         prefix=f".{os.path.basename(path)}.", suffix=".part")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())  # so that a crash after the rename cannot leave an empty file
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
