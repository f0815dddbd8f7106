"""The named questions of `ioassess fleet query` (docs/fleet.md, "Queries"): one SQL text per
question over the views jobs, findings, files and latency, run by DuckDB (engine.py). Each
question's rows are what the docs say they are; `job` takes the job key as its argument.

A query's text has {where}: the filters of the command line on the jobs view (alias j), always a
valid condition ("TRUE" without filters); its parameters come with it, in order.
"""
import dataclasses

# Runs of an application a regression is judged against, and how far above their median (in
# interquartile ranges of those runs, and at least this share of it) a run must lose to be one.
HISTORY_RUNS = 10
REGRESSION_IQRS = 3.0
REGRESSION_DAYS = 7
REGRESSION_MIN_RISE = 0.5
OUTLIER_MADS = 5.0
PERCENTILES = (0.5, 0.9, 0.99, 0.999)
LIMIT = 20


@dataclasses.dataclass(frozen=True)
class Query:
    name: str
    help: str
    sql: str
    unfiltered_sql: str = ""    # the same rows from the rollups, when no filter is given
    leading: str = ""           # "argument" (the job key) or "since": the parameter before the filters'

    @property
    def takes_argument(self):
        return self.leading == "argument"


_GROUPED = """
SELECT {column} AS {name}, count(*) AS jobs, sum(j.io_s) AS io_s, sum(j.lost_high_s) AS lost_high_s,
       median(j.lost_high_s) AS median_lost_s, sum(j.runtime_s * j.nodes) AS node_seconds,
       arg_max(j.job_key, j.lost_high_s) AS worst_job, max(j.lost_high_s) AS worst_lost_s
FROM jobs j WHERE {{where}}
GROUP BY {column} ORDER BY lost_high_s DESC, {name} LIMIT {limit}
"""

# Percentiles from summed bin counts: the middle of the bin that holds the op of rank
# floor(q (n - 1)); {counts} gives (kind, mount_point, fs_type, bin, n).
_LATENCY = """
WITH counts AS ({counts}),
cumulative AS (
  SELECT *, sum(n) OVER (PARTITION BY kind, mount_point, fs_type ORDER BY bin) AS upto,
         sum(n) OVER (PARTITION BY kind, mount_point, fs_type) AS total
  FROM counts)
SELECT kind, mount_point, fs_type, any_value(total) AS ops,
""" + ",\n".join(f"       {{{{min_s}}}} * pow({{{{ratio}}}}, min(bin) FILTER (WHERE upto > floor({p} * (total - 1))))"
                 f" AS p{str(p)[2:].ljust(2, '0')}_s" for p in PERCENTILES) + """
FROM cumulative GROUP BY kind, mount_point, fs_type ORDER BY kind, mount_point, fs_type
"""

QUERIES = {q.name: q for q in (
    Query("top-lost", "jobs by wall-clock time lost compared with cached I/O, with the main cause and first finding",
          f"""
SELECT j.job_key, j.user, j.app, j."end", j.runtime_s, j.io_s, j.lost_low_s, j.lost_high_s, j.main_cause,
       j.first_finding, j.at_stake_s, j.main_fs
FROM jobs j WHERE {{where}}
ORDER BY j.lost_high_s DESC, j.job_key LIMIT {LIMIT}
"""),
    Query("by-app", "applications (executable names): jobs, time lost in all and per job, the worst job",
          _GROUPED.format(column="j.app", name="app", limit=LIMIT)),
    Query("by-user", "users: jobs, time lost in all and per job, the worst job",
          _GROUPED.format(column="j.user", name="user", limit=LIMIT)),
    Query("by-fs", "file systems (each job's main one): jobs, time lost in all and per job, the worst job",
          _GROUPED.format(column="j.main_fs", name="main_fs", limit=LIMIT)),
    Query("findings", "how often each finding fires, on how many jobs, and the wall-clock seconds at stake",
          f"""
SELECT coalesce(f.code, f.title) AS finding, min(f.title) AS title, count(*) AS fired,
       count(DISTINCT f.job_key) AS jobs, sum(f.at_stake_s) AS at_stake_s, max(f.at_stake_s) AS largest_at_stake_s
FROM findings f JOIN jobs j ON j.job_key = f.job_key AND j.month = f.month WHERE {{where}}
GROUP BY finding ORDER BY at_stake_s DESC NULLS LAST, fired DESC, finding LIMIT {LIMIT}
""", unfiltered_sql=f"""
SELECT finding, min(title) AS title, sum(fired) AS fired, sum(jobs) AS jobs, sum(at_stake_s) AS at_stake_s,
       max(largest_at_stake_s) AS largest_at_stake_s
FROM findings_totals
GROUP BY finding ORDER BY at_stake_s DESC NULLS LAST, fired DESC, finding LIMIT {LIMIT}
"""),
    Query("trend", "per week and file system: jobs, I/O time, time lost and its share",
          """
SELECT date_trunc('week', j."end") AS week, j.main_fs, count(*) AS jobs, sum(j.io_s) AS io_s,
       sum(j.lost_high_s) AS lost_high_s, sum(j.lost_high_s) / nullif(sum(j.io_s), 0) AS lost_share
FROM jobs j WHERE {where} AND j."end" IS NOT NULL
GROUP BY week, j.main_fs ORDER BY week, j.main_fs
"""),
    Query("regressions", f"runs in the window (--since, --until; default the last {REGRESSION_DAYS} days of the "
                         f"store) that lost more than their application's last {HISTORY_RUNS} runs' median by "
                         f"{REGRESSION_IQRS:g} of their interquartile ranges and by {REGRESSION_MIN_RISE:.0%}",
          f"""
WITH bounds AS (
  SELECT coalesce(CAST(? AS TIMESTAMPTZ), max("end") - INTERVAL {REGRESSION_DAYS} DAY) AS since FROM jobs),
candidates AS (
  SELECT j.job_key, j.app, j."end", j.lost_high_s FROM jobs j, bounds b
  WHERE {{where}} AND j."end" >= b.since AND j.app <> ''),
prior AS (
  SELECT j.app, unnest(max_by({{{{'job_key': j.job_key, 'end': j."end", 'lost_high_s': j.lost_high_s}}}}, j."end",
                              {HISTORY_RUNS})) AS run
  FROM jobs j, bounds b WHERE j."end" < b.since AND j.app IN (SELECT app FROM candidates) GROUP BY j.app),
runs AS (
  SELECT job_key, app, "end", lost_high_s, true AS candidate FROM candidates
  UNION ALL SELECT run.job_key, app, run."end", run.lost_high_s, false FROM prior),
judged AS (
  SELECT *, count(*) OVER history AS runs, quantile_cont(lost_high_s, 0.5) OVER history AS history_median,
         quantile_cont(lost_high_s, 0.75) OVER history - quantile_cont(lost_high_s, 0.25) OVER history
           AS history_iqr
  FROM runs
  WINDOW history AS (PARTITION BY app ORDER BY "end", job_key ROWS BETWEEN {HISTORY_RUNS} PRECEDING AND 1 PRECEDING))
SELECT job_key, app, "end", lost_high_s, history_median, history_iqr
FROM judged
WHERE candidate AND runs = {HISTORY_RUNS} AND lost_high_s > history_median + {REGRESSION_IQRS} * history_iqr
  AND lost_high_s > (1 + {REGRESSION_MIN_RISE}) * history_median
ORDER BY lost_high_s - history_median DESC, job_key LIMIT {LIMIT}
""", leading="since"),
    Query("outliers", f"jobs whose time lost lies over {OUTLIER_MADS:g} median absolute deviations above their "
                      f"application's median",
          f"""
WITH apps AS (
  SELECT j.app, median(j.lost_high_s) AS app_median FROM jobs j WHERE {{where}} GROUP BY j.app),
spread AS (
  SELECT a.app, a.app_median, median(abs(j.lost_high_s - a.app_median)) AS app_mad
  FROM jobs j JOIN apps a ON a.app = j.app WHERE {{where}} GROUP BY a.app, a.app_median)
SELECT j.job_key, j.app, j.user, j.lost_high_s, s.app_median, s.app_mad,
       (j.lost_high_s - s.app_median) / s.app_mad AS mads
FROM jobs j JOIN spread s ON s.app = j.app
WHERE {{where}} AND s.app_mad > 0 AND j.lost_high_s > s.app_median + {OUTLIER_MADS} * s.app_mad
ORDER BY mads DESC, j.job_key LIMIT {LIMIT}
"""),
    Query("latency", "fleet-wide percentiles of op durations per op kind and file system, from the jobs' "
                     "histograms summed",
          _LATENCY.format(counts="""
  SELECT l.kind, l.mount_point, l.fs_type, l.bin, sum(l.count) AS n
  FROM latency l JOIN jobs j ON j.job_key = l.job_key AND j.month = l.month WHERE {where}
  GROUP BY l.kind, l.mount_point, l.fs_type, l.bin"""),
          unfiltered_sql=_LATENCY.format(counts="""
  SELECT kind, mount_point, fs_type, bin, sum(count) AS n FROM latency_totals
  GROUP BY kind, mount_point, fs_type, bin""")),
    Query("job", "one job against its application's history: its time lost, the median of the application's "
                 "runs, its rank among them",
          """
WITH mine AS (SELECT * FROM jobs WHERE job_key = ?),
history AS (
  SELECT j.job_key, j.lost_high_s FROM jobs j JOIN mine m ON j.app = m.app AND j.app <> '' WHERE {where})
SELECT m.job_key, m.user, m.app, m."end", m.runtime_s, m.io_s, m.lost_low_s, m.lost_high_s, m.main_cause,
       m.first_finding, m.at_stake_s, (SELECT count(*) FROM history) AS app_runs,
       (SELECT median(lost_high_s) FROM history) AS app_median_lost_s,
       (SELECT count(*) FROM history h WHERE h.lost_high_s > m.lost_high_s) + 1 AS rank_by_lost
FROM mine m
""", leading="argument"),
)}
