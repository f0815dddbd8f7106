"""What the HTML pages (the report, the training report, the probe's report) share: Jinja2
templates rendered with autoescaping and written atomically."""
import functools

import jinja2

from .files import replace_atomically


def write_page(path, template_dir, template_name, data, filters=None, mode=0o600, group=-1):
    """Render a template (every value escaped unless marked safe) and write it to path through
    a temporary file, so that an interrupted run never leaves a partial page behind; mode and
    group as for replace_atomically."""
    environment = _environment(template_dir)
    environment.filters.update(filters or {})
    replace_atomically(path, environment.get_template(template_name).render(**data), mode, group)


@functools.lru_cache(maxsize=None)
def _environment(template_dir):
    """One Jinja2 environment per template directory: it keeps its compiled templates (compiling
    the report's takes longer than rendering it), also from one process to the next
    (_bytecode_cache)."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(template_dir), autoescape=True,
                              undefined=jinja2.StrictUndefined, bytecode_cache=_bytecode_cache())


def _bytecode_cache():
    """Jinja2's cache of compiled templates in the user's own directory of the temporary
    directory (_jinja2-cache-UID, mode 0700, which Jinja2 refuses unless this user owns it and
    no one else can enter it; entries keyed by the template's checksum), or None when there is
    no such directory to be had (another user made one by that name): then each run compiles."""
    try:
        return jinja2.FileSystemBytecodeCache()
    except (RuntimeError, OSError):
        return None
