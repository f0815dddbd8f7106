"""The site's tools, run by admins: training and calibrating the cause models (training,
training_report), the I/O-model grid (iomodels), the job-end report from Slurm (epilog) and the
file-system probe (probe)."""
