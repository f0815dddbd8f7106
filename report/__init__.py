"""The ioassess report (installed as ioassess.report): a job's inputs -> Job (ioassess.load) ->
assessment, plain JSON-serialisable data (assess.py) -> self-contained report.html (render.py,
templates/report.html.j2) and assessment.json.
"""
import json
import math

from ioassess.files import replace_atomically
from ioassess.load import load_job
from ioassess.models.modelfile import load_model, model_path
from ioassess.progress import Progress

from .assess import assess
from .render import write_report

# Shares of the work, for the progress bar.
LOAD_SHARE, ASSESS_SHARE, RENDER_SHARE = 0.5, 0.2, 0.3
# The progress bar appears only for inputs that take longer than this.
QUIET_FOR_S = 1.0


def make_report(inputs, model_name_or_path, html_path=None, json_path=None, stream=None):
    """Load the inputs, assess them under the model, write the HTML report and/or the JSON;
    returns the assessment. Raises LoadError or ModelFileError (one line each)."""
    progress = Progress(1.0, stream, quiet_for_s=QUIET_FOR_S) if stream is not None else None
    model = load_model(model_name_or_path)
    job = load_job(inputs)
    _advance(progress, LOAD_SHARE, "loaded")
    assessment = json_safe(assess(job, model, model_path(model_name_or_path)))
    _advance(progress, ASSESS_SHARE, "assessed")
    if json_path:
        replace_atomically(json_path, json.dumps(assessment, indent=1, allow_nan=False) + "\n")
    if html_path:
        write_report(html_path, assessment)
    _advance(progress, RENDER_SHARE, "written")
    return assessment


def _advance(progress, share, label):
    if progress is not None:
        progress.advance(share, label)


def json_safe(value):
    """The value with every non-finite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


__all__ = ["assess", "json_safe", "make_report", "write_report"]
