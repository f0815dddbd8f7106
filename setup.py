"""Build glue: the Python packages (top-level models/ and report/ become ioassess.models and
ioassess.report) and the C recorder, compiled by plugin/Makefile into ioassess/lib/."""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution


class BuildPyWithRecorder(build_py):
    """Compile libioassess.so with plugin/Makefile and put it inside the package."""

    def run(self):
        super().run()
        out_dir = os.path.abspath(os.path.join(self.build_lib, "ioassess", "lib"))
        os.makedirs(out_dir, exist_ok=True)
        subprocess.check_call(["make", "-C", "plugin", "--no-print-directory", f"OUT={out_dir}"])


class BinaryDistribution(Distribution):
    """The wheel carries a native library, so it is platform specific."""

    def has_ext_modules(self):
        return True


setup(
    packages=["ioassess", "ioassess.models", "ioassess.probe", "ioassess.report"],
    package_dir={"ioassess": "ioassess", "ioassess.models": "models", "ioassess.report": "report"},
    package_data={"ioassess.models": ["pretrained/*.json", "templates/*.j2"], "ioassess.probe": ["templates/*.j2"],
                  "ioassess.report": ["templates/*.j2"]},
    cmdclass={"build_py": BuildPyWithRecorder},
    distclass=BinaryDistribution,
)
