"""Darshan's own runtime for the tests that run beside it (tests/test_darshan_runtime.py).

Either a site's installed runtime, given by IOASSESS_DARSHAN_LIB (libdarshan.so built without
MPI) and IOASSESS_DARSHAN_MPI_LIB (built with mpicc), or both built once per machine from
Darshan's release tarball ($IOASSESS_DARSHAN_SOURCE, else ../shared/vendor/darshan-*.tar.gz
beside the repository) into build/darshan-VERSION/ of the checkout. The build goes into a
temporary directory renamed into place when complete, so a second test session reuses it and
two racing sessions never see half a runtime.
"""
import glob
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD_ROOT = REPO / "build"
VENDORED = REPO.parent / "shared" / "vendor"
STAMP = "built"  # written last inside the build, so a directory without it is never used
CONFIGURE_COMMON = ("--with-log-path-by-env=DARSHAN_LOGPATH", "--with-jobid-env=SLURM_JOB_ID")
BUILD_TIMEOUT_S = 1800


class Unavailable(Exception):
    """No Darshan runtime: the one-line reason."""


class BuildFailed(Exception):
    """Darshan's source is there but does not build: the command and its last line of output."""


@dataclass(frozen=True)
class Runtime:
    lib: str        # libdarshan.so without MPI (DARSHAN_ENABLE_NONMPI=1)
    mpi_lib: str    # libdarshan.so built with mpicc, for MPI programs under mpiexec


def find_runtime():
    """The installed runtime if the environment names one, else the one built from the tarball."""
    lib, mpi_lib = os.environ.get("IOASSESS_DARSHAN_LIB"), os.environ.get("IOASSESS_DARSHAN_MPI_LIB")
    if lib or mpi_lib:
        for name, path in (("IOASSESS_DARSHAN_LIB", lib), ("IOASSESS_DARSHAN_MPI_LIB", mpi_lib)):
            if not path or not os.path.isfile(path):
                raise Unavailable(f"{name}={path or ''} is not a file: give both libdarshan.so (without and with MPI)")
        return Runtime(lib, mpi_lib)
    return built_runtime(source_tarball())


def source_tarball():
    given = os.environ.get("IOASSESS_DARSHAN_SOURCE")
    if given:
        if not os.path.isfile(given):
            raise Unavailable(f"IOASSESS_DARSHAN_SOURCE={given} is not a file")
        return pathlib.Path(given)
    found = sorted(glob.glob(str(VENDORED / "darshan-*.tar.gz")))
    if not found:
        raise Unavailable(f"no Darshan runtime: set IOASSESS_DARSHAN_LIB and IOASSESS_DARSHAN_MPI_LIB, "
                          f"or IOASSESS_DARSHAN_SOURCE, or put darshan-*.tar.gz in {VENDORED}")
    return pathlib.Path(found[-1])


def built_runtime(tarball):
    version = re.fullmatch(r"darshan-(.+)\.tar\.gz", tarball.name)
    if version is None:
        raise Unavailable(f"{tarball}: not named darshan-VERSION.tar.gz")
    final = BUILD_ROOT / f"darshan-{version[1]}"
    if not (final / STAMP).exists():
        build_into(tarball, final)
    return Runtime(str(final / "nompi" / "lib" / "libdarshan.so"), str(final / "mpi" / "lib" / "libdarshan.so"))


def build_into(tarball, final):
    """Build both runtimes with prefixes under `final`, installed into a staging directory that
    is renamed to `final` at the end (a racing session's complete build wins; ours is dropped)."""
    BUILD_ROOT.mkdir(exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"{final.name}.tmp-", dir=BUILD_ROOT))
    try:
        subprocess.run(["tar", "-xzf", str(tarball), "-C", str(work)], check=True, capture_output=True)
        source = next(work.glob("darshan-*/"))
        step(["./prepare.sh"], source)
        staging = work / "staging"
        for name, flags in (("nompi", ["--without-mpi", "CC=gcc"]), ("mpi", ["CC=mpicc"])):
            out = work / f"build-{name}"
            out.mkdir()
            step([str(source / "darshan-runtime" / "configure"), f"--prefix={final / name}", *CONFIGURE_COMMON,
                  *flags], out)
            step(["make", "-j2", "install", f"DESTDIR={staging}"], out)
        built = staging / final.relative_to("/")
        (built / STAMP).write_text(f"{tarball}\n")
        try:
            os.rename(built, final)
        except OSError:
            if not (final / STAMP).exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def step(cmd, cwd):
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise BuildFailed(f"building Darshan failed in {cwd}: {' '.join(cmd)}: "
                          f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
