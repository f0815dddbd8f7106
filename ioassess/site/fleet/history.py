"""A run against its application's last runs in the site's store, for the job's report at job
end (docs/fleet.md, "A job's history in its report"): how many of them there are, their median
time lost, the run's rank among them and whether it is a regression, by the rule of the
`regressions` question (queries.py, HISTORY)."""
import math

from ...report.latency import LATENCY_SCALE
from .engine import connect
from .queries import HISTORY, HISTORY_RUNS, REGRESSION_IQRS, REGRESSION_MIN_RISE, filled
from .store import StoreError


def app_history(store, app, end, lost_high_s):
    """{"app", "runs", "median_lost_s", "iqr_lost_s", "rank", "regression", and the rule's
    constants} of a run of app that ended at `end` (an aware datetime) having lost lost_high_s
    (process-seconds), or None when the run cannot be placed (no application, no end). Raises
    StoreError when the store cannot be read."""
    if not app or end is None or not math.isfinite(lost_high_s):
        return None
    engine = connect(store)
    try:
        sql, _ = filled(HISTORY, engine.dialect, "TRUE", True, LATENCY_SCALE)
        _, [(runs, median, iqr, rank, regression)] = engine.run(sql, [lost_high_s, app, end])
    except engine.error as error:
        raise StoreError(f"{store}: {str(error).splitlines()[0]}") from None
    finally:
        engine.close()
    return {"app": app, "runs": runs, "median_lost_s": median, "iqr_lost_s": iqr, "rank": rank,
            "regression": bool(regression), "history_runs": HISTORY_RUNS, "regression_iqrs": REGRESSION_IQRS,
            "regression_min_rise": REGRESSION_MIN_RISE}

