"""What the HTML pages (the report, the training report, the probe's report) share: Jinja2
templates rendered with autoescaping and written atomically."""
import functools
import os
import stat
import tempfile

import jinja2

from .files import replace_atomically

# What every page includes: its style sheet (page.css).
SHARED_TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
# Whether this process keeps compiled templates between runs (_bytecode_cache); the epilog's
# worker turns it off (compile_templates_anew).
_keep_compiled_templates = True


def write_page(path, template_dir, template_name, data, filters=None, mode=0o600, group=-1):
    """Render a template (every value escaped unless marked safe) and write it to path through
    a temporary file, so that an interrupted run never leaves a partial page behind; mode and
    group as for replace_atomically."""
    environment = _environment(template_dir)
    environment.filters.update(filters or {})
    replace_atomically(path, environment.get_template(template_name).render(**data), mode, group)


def compile_templates_anew():
    """From now on this process compiles every template from its source and keeps no compiled
    one: for the epilog's worker, which runs as the job's user and must load nothing that user
    can write, as their cache of compiled templates is (about 0.13 s more per report)."""
    global _keep_compiled_templates
    _keep_compiled_templates = False


@functools.lru_cache(maxsize=None)
def _environment(template_dir):
    """One Jinja2 environment per template directory: it keeps its compiled templates (compiling
    the report's takes longer than rendering it), also from one process to the next
    (_bytecode_cache)."""
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(template_dir), jinja2.FileSystemLoader(SHARED_TEMPLATES)])
    return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                              bytecode_cache=_bytecode_cache())


def _bytecode_cache():
    """Jinja2's cache of compiled templates (Python modules, which rendering runs) in this
    user's own directory of the temporary directory, _jinja2-cache-UID (made mode 0700), used
    only when it is a directory, not a link, owned by this process's user and writable by no one
    else; otherwise, or after compile_templates_anew, None: each run compiles."""
    if not _keep_compiled_templates:
        return None
    directory = os.path.join(tempfile.gettempdir(), f"_jinja2-cache-{os.geteuid()}")
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        status = os.lstat(directory)
    except OSError:
        return None
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o022:
        return None
    return jinja2.FileSystemBytecodeCache(directory)
