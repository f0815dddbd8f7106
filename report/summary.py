"""The assessment in a few lines of text (`ioassess report --format text`): what a user reads in
the batch job's output. Data first, as the page: a function of the assessment alone."""
from ioassess.escape import printable
from ioassess.units import count_text, interval_text, seconds_text, share_text

# Findings listed: those with seconds at stake, most first (the assessment's order).
FINDINGS_SHOWN = 3
# The headline's causes of time lost (headline.lost_by_cause) and of slowness caching would not
# save (headline.slowness_by_cause) in words.
CAUSE_WORDS = {"storage": "waiting for storage", "new_pages": "writing whole pages of uncached files",
              "stall": "in stalls",
               "allocation": "waiting for new memory", "memory": "within the page cache and memory speed"}


def text_summary(assessment, report_path=None):
    """The summary: its lines, each ending with a newline, control characters escaped."""
    job, head, meta = assessment["job"], assessment["headline"], assessment["metadata"]
    who = " ".join(filter(None, [f"job {job['job_id']}" if job["job_id"] else "", job["cmdline"] or job["exe"]]))
    hosts = len(job["hosts"])
    lines = [f"ioassess: {who}: {count_text(job['processes_recorded'], 'process')}"
             + (f" on {count_text(hosts, 'host')}" if hosts > 1 else "")
             + (f", {seconds_text(job['runtime_s'])}" if job["runtime_s"] is not None else "")]
    lost = interval_text(head["lost_low_s"], head["lost_high_s"])
    share = f" ({share_text(head['lost_share_of_io'])} of the I/O time)" if head["lost_share_of_io"] is not None else ""
    lines.append(f"  I/O time {seconds_text(head['io_s'])}; lost compared with cached I/O {lost}{share}"
                 + (" (partly estimated from counters)" if head["estimate"] else ""))
    for label, by_cause in (("why", head["lost_by_cause"]),
                            ("beside it, not storage", head["slowness_by_cause"])):
        causes = sorted(((seconds, CAUSE_WORDS[cause]) for cause, seconds in by_cause.items() if seconds > 0),
                        reverse=True)
        if causes:
            lines.append(f"  {label}: " + ", ".join(f"{seconds_text(seconds)} {words}" for seconds, words in causes))
    if meta:
        lines.append(f"  metadata: {count_text(meta['calls'], 'call')}, {seconds_text(meta['seconds'])}")
    if assessment["io_uring"]:
        lines.append(f"  {count_text(assessment['io_uring']['instances'], 'io_uring instance')}: not timed")
    findings = [f for f in assessment["recommendations"] if f["at_stake_s"]][:FINDINGS_SHOWN]
    if findings:
        lines.append("  what to look at first:")
        lines += [f"    {n}. {finding['title']}: {seconds_text(finding['at_stake_s'])} at stake"
                  for n, finding in enumerate(findings, 1)]
    if report_path:
        lines.append(f"  the report: {report_path}")
    return "".join(printable(line) + "\n" for line in lines)   # names from the job: no control bytes
