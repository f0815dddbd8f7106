"""What the HTML pages (the report, the training report) share: plots embedded as PNG data
URIs, and Jinja2 templates rendered with autoescaping and written atomically."""
import base64
import functools
import io

import jinja2

from .files import replace_atomically


def new_figure(width_in, height_in):
    """A matplotlib figure and axes drawn off-screen (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width_in, height_in))


def png_data_uri(figure):
    """The figure as a data: URI (the page needs no other file), and the figure closed."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


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
    the report's takes longer than rendering it)."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(template_dir), autoescape=True,
                              undefined=jinja2.StrictUndefined)
