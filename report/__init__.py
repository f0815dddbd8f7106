"""The ioassess report (installed as ioassess.report): a job's inputs -> Job (ioassess.inputs.load) ->
assessment, plain JSON-serialisable data (assess.py) -> self-contained report.html (render.py,
templates/report.html.j2) and assessment.json.
"""
import json

from ioassess.escape import printable
from ioassess.files import replace_atomically
from ioassess.inputs.job import op_count
from ioassess.inputs.load import load_job
from ioassess.models.modelfile import load_model, model_path
from ioassess.progress import Progress
from ioassess.site.iomodels import GridFileError, load_site_grid
from ioassess.site.probe.during_job import find_probe_db

from .assess import assess
from .export import write_parquet, write_perfetto
from .model_choice import choose_model, file_models, given_model_choice
from .render import write_report
from .schema import json_safe

# Shares of the work, for the progress bar: loading reads the inputs' facts (a trace's ops are
# read chunk by chunk while they are assessed).
LOAD_SHARE, ASSESS_SHARE, RENDER_SHARE = 0.1, 0.8, 0.1
# The progress bar appears only on a terminal, for inputs that take longer than this.
QUIET_FOR_S = 1.0


def make_report(inputs, model_name_or_path=None, html_path=None, json_path=None, stream=None, site_grid=None,
                owner_uid=None, mode=0o600, group=-1, model_dirs=None, probe_db=None, history=None):
    """Load the inputs, assess them under the model, write the HTML report and/or the JSON;
    returns the assessment. Raises LoadError, ModelFileError or GridFileError (one line each)
    before anything is written. model_name_or_path: the model to use; None: the one whose
    provenance fits the job best (model_choice.choose_model) from model_dirs (default: the
    user's, the site's, the shipped ones). site_grid: the I/O-model grid file to place the job
    on; without it, the site's (find_site_grid). owner_uid: whose traces are taken (load_job;
    default: the effective uid's). probe_db: the file-system probe's store; without it, the one
    find_probe_db finds, if any. Both files get exactly mode and, when given, the group gid
    `group`: 0600 by default, as the job's traces, since they name its files and command line.
    history: as assess() takes it (the epilog's question to the site's store), or None."""
    grid = find_site_grid(site_grid, stream)
    progress = Progress(1.0, stream, quiet_for_s=QUIET_FOR_S) if stream is not None and stream.isatty() else None
    job, model, path, choice = load_and_choose(inputs, model_name_or_path, owner_uid, model_dirs)
    _advance(progress, LOAD_SHARE, "loaded")
    assessment = json_safe(assess(job, model, path, grid, choice, find_probe_db(probe_db), history,
                                  progress=progress and (lambda share, label: progress.advance(ASSESS_SHARE * share,
                                                                                               label))))
    if json_path:
        replace_atomically(json_path, json.dumps(assessment, indent=1, allow_nan=False) + "\n", mode, group)
    if html_path:
        write_report(html_path, assessment, mode, group)
    _advance(progress, RENDER_SHARE, "written")
    return assessment


def load_and_choose(inputs, model_name_or_path=None, owner_uid=None, model_dirs=None):
    """(job, model, model's path, choice): the inputs loaded (load_job) and the model given, or
    the one whose provenance fits the job best. Raises LoadError or ModelFileError (a model
    given is loaded first: a wrong name fails before any input is read)."""
    given = None if model_name_or_path is None else load_model(model_name_or_path, model_dirs)
    job = load_job(inputs, owner_uid)
    if given is None:
        return (job, *choose_model(job, model_dirs))
    path = model_path(model_name_or_path, model_dirs)
    return job, given, path, given_model_choice(job, given, path)


def export_job(inputs, perfetto_path=None, parquet_path=None, model_name_or_path=None, owner_uid=None, mode=0o600):
    """`ioassess export`: the job's ops as a Trace Event Format file for Perfetto's UI and/or a
    Parquet table (export.py); returns how many ops they hold."""
    job, model, path, choice = load_and_choose(inputs, model_name_or_path, owner_uid)
    per_file = file_models(job, model, path, choice)
    if perfetto_path:
        write_perfetto(perfetto_path, job, model, model.name, mode, per_file)
    if parquet_path:
        write_parquet(parquet_path, job, model, mode, per_file)
    return op_count(job)


def find_site_grid(explicit, stream=None):
    """The grid for assess(): {"path", "grid"}, or None when there is none (docs/iomodels.md,
    "The site grid"). A grid file given explicitly that is missing or invalid raises
    GridFileError; the site's ($IOASSESS_SITE_GRID, the installed one) must not cost the job its
    report: its problem becomes {"path", "problem"}, said in the report and on stream."""
    try:
        found = load_site_grid(explicit)
    except GridFileError as error:
        if explicit:
            raise
        if stream is not None:
            stream.write(f"ioassess: site grid not used: {printable(str(error))}\n")
        return {"path": error.path, "problem": error.problem}
    return None if found is None else {"path": found[0], "grid": found[1]}


def _advance(progress, share, label):
    if progress is not None:
        progress.advance(share, label)


__all__ = ["assess", "json_safe", "make_report", "write_report"]
