-- ioassess: per-operation I/O recorder and I/O assessment of HPC jobs (docs/epilog.md, "Lmod").
-- contrib/lmod/make-module.sh fills in the @...@ values of an installation.
local bin = "@BIN@"                 -- the directory of the `ioassess` command
local pythonpath = "@PYTHONPATH@"   -- the directory holding the ioassess package
local libraries = "@LIBRARIES@"     -- the recorder, then the MPI-IO recorder if built (':'-separated)
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
    for library in libraries:gmatch("[^:]+") do
        append_path("LD_PRELOAD", library)   -- after libraries already preloaded, e.g. Darshan
    end
end
