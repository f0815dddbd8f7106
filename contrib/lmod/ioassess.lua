-- ioassess: per-operation I/O recorder and I/O assessment of HPC jobs (docs/epilog.md, "Lmod").
-- contrib/lmod/make-module.sh fills in the @...@ values of an installation.
local bin = "@BIN@"                 -- the directory of the `ioassess` command
local pythonpath = "@PYTHONPATH@"   -- the directory holding the ioassess package
local recorder = "@RECORDER@"       -- libioassess.so
local mpiio_recorder = "@MPIIO_RECORDER@"  -- libioassess-mpiio.so, empty if it was not built
local trace_root = "@TRACE_ROOT@"   -- the site's traces: TRACE_ROOT/<user>/<job id>

whatis("Name: ioassess")
whatis("Description: per-operation I/O recorder and I/O assessment of HPC jobs")
help([[
ioassess records the I/O of a job's programs and reports how much of its I/O time was lost
against cached I/O, and why. Loaded inside a Slurm job (in the batch script), this module
preloads the recorder into every program started after it, with the traces going to
]] .. trace_root .. [[/<user>/<job id>; the report is written when the job ends.
Outside a job it only provides the `ioassess` command (`ioassess run -- ./app`).
]])

prepend_path("PATH", bin)
prepend_path("PYTHONPATH", pythonpath)

local job = os.getenv("SLURM_JOB_ID")
local user = os.getenv("USER")
if job and job ~= "" and user and user ~= "" then
    setenv("IOASSESS_TRACE_DIR", pathJoin(trace_root, user, job))
    -- libioassess-mpiio.so:libdarshan.so:libioassess.so when Darshan is preloaded: the order in
    -- which both record every MPI-IO call and Darshan's counters stay its own (ioassess run's).
    if mpiio_recorder ~= "" then
        prepend_path("LD_PRELOAD", mpiio_recorder)
    end
    append_path("LD_PRELOAD", recorder)
end
