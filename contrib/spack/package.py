# Spack recipe for ioassess (docs/epilog.md, "Spack"). Untested: this project's machines have no
# Spack; it keeps to what Spack's PythonPackage documentation describes. Install it in a site
# repository as packages/ioassess/package.py.
from spack.package import *


class Ioassess(PythonPackage):
    """Per-operation I/O recorder (an LD_PRELOAD library) and I/O assessment of HPC jobs: how
    much of a job's I/O time was lost against cached I/O, and why."""

    # No release is published yet: build a checkout with
    #   spack develop --path /path/to/ioassess ioassess@main; spack install ioassess@main
    # or set `git` to the URL of the site's clone.
    version("main", branch="main")

    # `pip install` compiles the recorder (plugin/Makefile) into the package.
    depends_on("c", type="build")
    depends_on("gmake", type="build")

    depends_on("python@3.9:", type=("build", "run"))
    depends_on("py-setuptools@61:", type="build")
    depends_on("py-wheel", type="build")
    depends_on("py-numpy@1.22:", type=("build", "run"))
    depends_on("py-jinja2@3:", type=("build", "run"))
    # PyDarshan reads Darshan logs with the darshan-util library it ships.
    depends_on("py-darshan@3.5", type=("build", "run"))

    variant("mpi", default=False, description="Also build the MPI-IO recorder, libioassess-mpiio.so")
    depends_on("mpi", when="+mpi")

    def setup_build_environment(self, env):
        # plugin/Makefile builds the MPI-IO recorder when $MPICC names a compiler it finds;
        # empty, it builds none (even with an mpicc on PATH).
        env.set("MPICC", self.spec["mpi"].mpicc if self.spec.satisfies("+mpi") else "")
