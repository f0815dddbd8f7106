"""The named questions of `ioassess fleet query` (docs/fleet.md, "Queries"): one SQL text per
question over the views jobs, findings, files, latency and the rollups, run by DuckDB or Spark
(engine.py). Each question's rows are what the docs say they are; `job` takes the job key.

A text is filled in by the engine (str.format): {where} is the command line's filters on the
jobs view (alias j), always a valid condition ("TRUE" without filters), whose parameters come
with it; the names of DIALECTS are the few words the two engines spell differently; the other
names are the constants below.
"""
import dataclasses

# Runs of an application a regression is judged against, and how far above their median (in
# interquartile ranges of those runs, and at least this share of it) a run must lose to be one;
# the runs judged by default: those of the last REGRESSION_DAYS days of the store.
HISTORY_RUNS = 10
REGRESSION_IQRS = 3.0
REGRESSION_MIN_RISE = 0.5
REGRESSION_DAYS = 7
OUTLIER_MADS = 5.0
PERCENTILES = (0.5, 0.9, 0.99, 0.999)
LIMIT = 20

CONSTANTS = {"limit": LIMIT, "history_runs": HISTORY_RUNS, "regression_iqrs": REGRESSION_IQRS,
             "regression_min_rise": REGRESSION_MIN_RISE, "regression_days": REGRESSION_DAYS,
             "outlier_mads": OUTLIER_MADS}

# The last HISTORY_RUNS runs of each application before the window (`bounds`), for the
# applications of `candidates`: DuckDB's top-n aggregate, a ranking window on Spark (the same
# runs; ties of end time broken by job key on Spark only: end times are microseconds apart).
_PRIOR_DUCKDB = """
  SELECT run.job_key, run.app, run."end", run.lost_high_s FROM (
    SELECT unnest(max_by(struct_pack(job_key := j.job_key, app := j.app, "end" := j."end",
                                     lost_high_s := j.lost_high_s), j."end", {history_runs})) AS run
    FROM jobs j, bounds b WHERE j."end" < b.since AND j.app IN (SELECT app FROM candidates) GROUP BY j.app)"""
_PRIOR_SPARK = """
  SELECT job_key, app, `end`, lost_high_s FROM (
    SELECT j.job_key, j.app, j.`end`, j.lost_high_s,
           row_number() OVER (PARTITION BY j.app ORDER BY j.`end` DESC, j.job_key DESC) AS back
    FROM jobs j CROSS JOIN bounds b WHERE j.`end` < b.since AND j.app IN (SELECT app FROM candidates))
  WHERE back <= {history_runs}"""
DIALECTS = {
    "duckdb": {"end": '"end"', "user": "user", "timestamp": "TIMESTAMPTZ", "days": "DAY", "prior": _PRIOR_DUCKDB,
               "median": "median({})", "quantile": "quantile_cont({}, {})", "worst": "arg_max({}, row({}, {}))",
               "listed": "list_contains(string_split({}, ','), ?)"},
    "spark": {"end": "`end`", "user": "`user`", "timestamp": "TIMESTAMP", "days": "DAYS", "prior": _PRIOR_SPARK,
              "median": "percentile({}, 0.5)", "quantile": "percentile({}, {})",
              "worst": "max_by({}, struct({}, {}))", "listed": "array_contains(split({}, ','), ?)"},
}
ENGINES = tuple(DIALECTS)


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


def _grouped(column, name):
    return f"""
SELECT {column} AS {name}, count(*) AS jobs, sum(j.io_s) AS io_s, sum(j.lost_high_s) AS lost_high_s,
       {{median_lost_high}} AS median_lost_s, sum(j.runtime_s * j.nodes) AS node_seconds,
       {{worst_job_by_lost}} AS worst_job, max(j.lost_high_s) AS worst_lost_s
FROM jobs j WHERE {{where}}
GROUP BY {column} ORDER BY lost_high_s DESC, {name} LIMIT {{limit}}
"""


def _latency(counts):
    """Percentiles from summed bin counts: the middle of the bin that holds the op of rank
    floor(q (n - 1)); counts: a query of (kind, mount_point, fs_type, bin, n)."""
    rank = "min(bin) FILTER (WHERE upto > floor({q} * (total - 1)))"
    percentiles = ",\n".join(f"       {{min_s}} * pow({{ratio}}, {rank.format(q=q)}) AS p{str(q)[2:].ljust(2, '0')}_s"
                             for q in PERCENTILES)
    return f"""
WITH counts AS ({counts}),
cumulative AS (
  SELECT *, sum(n) OVER (PARTITION BY kind, mount_point, fs_type ORDER BY bin) AS upto,
         sum(n) OVER (PARTITION BY kind, mount_point, fs_type) AS total
  FROM counts)
SELECT kind, mount_point, fs_type, max(total) AS ops,
{percentiles}
FROM cumulative GROUP BY kind, mount_point, fs_type ORDER BY kind, mount_point, fs_type
"""


def _findings(source, finding, title, fired, jobs, stake, largest):
    return f"""
SELECT {finding} AS finding, min({title}) AS title, {fired} AS fired, {jobs} AS jobs, sum({stake}) AS at_stake_s,
       max({largest}) AS largest_at_stake_s
FROM {source}
GROUP BY {finding} ORDER BY at_stake_s DESC NULLS LAST, fired DESC, finding LIMIT {{limit}}
"""


QUERIES = {q.name: q for q in (
    Query("top-lost", "jobs by time lost compared with cached I/O (process-seconds), with the main cause, first "
                      "finding and the job's report",
          """
SELECT j.job_key, j.{user}, j.app, j.{end}, j.runtime_s, j.io_s, j.lost_low_s, j.lost_high_s, j.main_cause,
       j.first_finding, j.at_stake_s, j.main_fs, j.report
FROM jobs j WHERE {where}
ORDER BY j.lost_high_s DESC, j.job_key LIMIT {limit}
"""),
    Query("by-app", "applications (executable names): jobs, time lost in all and per job, the worst job",
          _grouped("j.app", "app")),
    Query("by-user", "users: jobs, time lost in all and per job, the worst job", _grouped("j.{user}", "{user}")),
    Query("by-fs", "file systems (each job's main one): jobs, time lost in all and per job, the worst job",
          _grouped("j.main_fs", "main_fs")),
    Query("findings", "how often each finding fires, on how many jobs, and the wall-clock seconds at stake",
          _findings("findings f JOIN jobs j ON j.job_key = f.job_key AND j.month = f.month WHERE {where}",
                    "coalesce(f.code, f.title)", "f.title", "count(*)", "count(DISTINCT f.job_key)", "f.at_stake_s",
                    "f.at_stake_s"),
          unfiltered_sql=_findings("findings_totals", "finding", "title", "sum(fired)", "sum(jobs)", "at_stake_s",
                                   "largest_at_stake_s")),
    Query("trend", "per week and file system: jobs, I/O time, time lost and its share, the probe's median and "
                   "90th percentile slowdown of the jobs",
          """
SELECT date_trunc('week', j.{end}) AS week, j.main_fs, count(*) AS jobs, sum(j.io_s) AS io_s,
       sum(j.lost_high_s) AS lost_high_s, sum(j.lost_high_s) / nullif(sum(j.io_s), 0) AS lost_share,
       {median_probe_slowdown} AS probe_slowdown_median, {p90_probe_slowdown} AS probe_slowdown_p90
FROM jobs j WHERE {where} AND j.{end} IS NOT NULL
GROUP BY date_trunc('week', j.{end}), j.main_fs ORDER BY week, j.main_fs
"""),
    Query("regressions", f"runs in the window (--since, --until; default the last {REGRESSION_DAYS} days of the "
                         f"store) that lost more than their application's last {HISTORY_RUNS} runs' median by "
                         f"{REGRESSION_IQRS:g} of their interquartile ranges and by {REGRESSION_MIN_RISE:.0%}",
          """
WITH bounds AS (
  SELECT coalesce(CAST(? AS {timestamp}), max({end}) - INTERVAL {regression_days} {days}) AS since FROM jobs),
candidates AS (
  SELECT j.job_key, j.app, j.{end}, j.lost_high_s FROM jobs j CROSS JOIN bounds b
  WHERE {where} AND j.{end} >= b.since AND j.app <> ''),
prior AS ({prior}),
runs AS (
  SELECT job_key, app, {end}, lost_high_s, true AS candidate FROM candidates
  UNION ALL SELECT job_key, app, {end}, lost_high_s, false AS candidate FROM prior),
judged AS (
  SELECT *, count(*) OVER history AS runs, {history_median} AS history_median, {history_iqr} AS history_iqr
  FROM runs
  WINDOW history AS (PARTITION BY app ORDER BY {end}, job_key
                     ROWS BETWEEN {history_runs} PRECEDING AND 1 PRECEDING))
SELECT job_key, app, {end}, lost_high_s, history_median, history_iqr
FROM judged
WHERE candidate AND {regression}
ORDER BY lost_high_s - history_median DESC, job_key LIMIT {limit}
""", leading="since"),
    Query("outliers", f"jobs whose time lost lies over {OUTLIER_MADS:g} median absolute deviations above their "
                      f"application's median",
          """
WITH apps AS (
  SELECT j.app, {median_lost_high} AS app_median FROM jobs j WHERE {where} GROUP BY j.app),
spread AS (
  SELECT a.app, a.app_median, {median_deviation} AS app_mad
  FROM jobs j JOIN apps a ON a.app = j.app WHERE {where} GROUP BY a.app, a.app_median)
SELECT j.job_key, j.app, j.{user}, j.lost_high_s, s.app_median, s.app_mad,
       (j.lost_high_s - s.app_median) / s.app_mad AS mads
FROM jobs j JOIN spread s ON s.app = j.app
WHERE {where} AND s.app_mad > 0 AND j.lost_high_s > s.app_median + {outlier_mads} * s.app_mad
ORDER BY mads DESC, j.job_key LIMIT {limit}
"""),
    Query("latency", "fleet-wide percentiles of op durations per op kind and file system, from the jobs' "
                     "histograms summed",
          _latency("""
  SELECT l.kind, l.mount_point, l.fs_type, l.bin, sum(l.count) AS n
  FROM latency l JOIN jobs j ON j.job_key = l.job_key AND j.month = l.month WHERE {where}
  GROUP BY l.kind, l.mount_point, l.fs_type, l.bin"""),
          unfiltered_sql=_latency("""
  SELECT kind, mount_point, fs_type, bin, sum(count) AS n FROM latency_totals
  GROUP BY kind, mount_point, fs_type, bin""")),
    Query("job", "one job against its application's history: its time lost, the number of the application's runs, "
                 "their median, its rank among them",
          """
WITH mine AS (SELECT * FROM jobs WHERE job_key = ?),
history AS (
  SELECT j.app, j.lost_high_s FROM jobs j WHERE {where} AND j.app <> '' AND j.app IN (SELECT app FROM mine))
SELECT m.job_key, m.{user}, m.app, m.{end}, m.runtime_s, m.io_s, m.lost_low_s, m.lost_high_s, m.main_cause,
       m.first_finding, m.at_stake_s, count(h.app) AS app_runs, {history_median_lost} AS app_median_lost_s,
       count(CASE WHEN h.lost_high_s > m.lost_high_s THEN 1 END) + 1 AS rank_by_lost
FROM mine m LEFT JOIN history h ON h.app = m.app
GROUP BY m.record_hash, m.job_key, m.{user}, m.app, m.{end}, m.runtime_s, m.io_s, m.lost_low_s, m.lost_high_s,
         m.main_cause, m.first_finding, m.at_stake_s
ORDER BY m.{end}, m.record_hash
""", leading="argument"),
)}


# One run (its time lost, and what it is judged against) of an application at job end, for the
# job's report: the application's last HISTORY_RUNS runs that ended before it (parameters: its
# time lost, the application, its end).
HISTORY = Query("history", "a run against its application's last runs", """
WITH mine AS (SELECT CAST(? AS DOUBLE) AS lost_high_s),
prior AS (
  SELECT j.lost_high_s FROM jobs j WHERE j.app = ? AND j.{end} < CAST(? AS {timestamp})
  ORDER BY j.{end} DESC, j.job_key DESC LIMIT {history_runs}),
judged AS (
  SELECT count(p.lost_high_s) AS runs, {prior_median} AS history_median, {prior_iqr} AS history_iqr,
         count(CASE WHEN p.lost_high_s > m.lost_high_s THEN 1 END) + 1 AS rank_by_lost, m.lost_high_s
  FROM mine m LEFT JOIN prior p ON TRUE GROUP BY m.lost_high_s)
SELECT runs, history_median, history_iqr, rank_by_lost, coalesce({regression}, false) AS regression FROM judged
""")


def filled(query, dialect, condition, unfiltered, scale):
    """The query's SQL for the dialect: the rollup text when unfiltered and it has one."""
    words = DIALECTS[dialect]
    median, quantile = words["median"], words["quantile"]
    template = query.unfiltered_sql if unfiltered and query.unfiltered_sql else query.sql
    values = {**CONSTANTS, **{key: value for key, value in words.items() if isinstance(value, str)},
              "where": condition, "min_s": repr(scale.min_s), "ratio": repr(scale.ratio),
              "median_lost_high": median.format("j.lost_high_s"),
              "median_probe_slowdown": median.format("j.probe_slowdown"),
              "p90_probe_slowdown": quantile.format("j.probe_slowdown", 0.9),
              # the job that lost most; of jobs that lost as much, the last by key (ties must not be left
              # to the engine: the two would answer differently)
              "worst_job_by_lost": words["worst"].format("j.job_key", "j.lost_high_s", "j.job_key"),
              "median_deviation": median.format("abs(j.lost_high_s - a.app_median)"),
              "history_median": quantile.format("lost_high_s", 0.5) + " OVER history",
              "history_iqr": f"{quantile.format('lost_high_s', 0.75)} OVER history - "
                             f"{quantile.format('lost_high_s', 0.25)} OVER history",
              "history_median_lost": median.format("h.lost_high_s"),
              "prior_median": quantile.format("p.lost_high_s", 0.5),
              "prior_iqr": f"{quantile.format('p.lost_high_s', 0.75)} - {quantile.format('p.lost_high_s', 0.25)}",
              # a run is a regression when its application has HISTORY_RUNS runs before it and it lost
              # more than their median by REGRESSION_IQRS of their interquartile range and by
              # REGRESSION_MIN_RISE of the median
              "regression": "runs = {history_runs} AND lost_high_s > history_median + {regression_iqrs} * history_iqr "
                            "AND lost_high_s > (1 + {regression_min_rise}) * history_median".format(**CONSTANTS)}
    values["prior"] = words["prior"].format(**values)
    return template.format(**values), template.count("{where}")
