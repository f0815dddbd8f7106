"""Build glue: the Python packages (ioassess/models and ioassess/report are links to the top-level
models/ and report/, so a checkout imports as installed) and the C recorder, compiled by
plugin/Makefile into ioassess/lib/ (of the build, or of the checkout for `pip install -e .`)."""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithRecorder(build_py):
    """Compile libioassess.so with plugin/Makefile and put it inside the package."""

    def run(self):
        super().run()
        package = os.path.join(HERE, "ioassess") if self.editable_mode else os.path.join(self.build_lib, "ioassess")
        out_dir = os.path.abspath(os.path.join(package, "lib"))
        os.makedirs(out_dir, exist_ok=True)
        subprocess.check_call(["make", "-C", os.path.join(HERE, "plugin"), "--no-print-directory", f"OUT={out_dir}"])


class BinaryDistribution(Distribution):
    """The wheel carries a native library, so it is platform specific."""

    def has_ext_modules(self):
        return True


setup(
    packages=["ioassess", "ioassess.inputs", "ioassess.models", "ioassess.report", "ioassess.site",
              "ioassess.site.probe", "ioassess.site.fleet"],
    package_data={"ioassess": ["templates/*.css"], "ioassess.models": ["pretrained/*.json"],
                  "ioassess.site": ["templates/*.j2"],
                  "ioassess.site.probe": ["templates/*.j2"],
                  "ioassess.report": ["templates/*.j2", "assessment.schema.json"]},
    cmdclass={"build_py": BuildPyWithRecorder},
    distclass=BinaryDistribution,
)
