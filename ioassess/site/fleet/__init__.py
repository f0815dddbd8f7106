"""The site's view across jobs: every job's record in one Parquet store, and named questions on
it (docs/fleet.md)."""
