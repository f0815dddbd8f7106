"""What a job's I/O is read from, made into one Job: the recorder's trace format (traceformat) and
reader (trace), Darshan logs (darshan_log, through darshan_util), the Job every input becomes
(job) and the loading of any mix of them (load)."""
