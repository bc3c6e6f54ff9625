"""Builds the census Python package: the _census extension through the project's CMake build.

    python3 -m pip install --no-build-isolation .

needs cmake, g++, pybind11-dev and nlohmann-json3-dev (scripts/bootstrap.sh installs them) and
downloads nothing.
"""
import os
import pathlib
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        package_dir = pathlib.Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = pathlib.Path(self.build_temp).resolve() / "cmake"
        subprocess.check_call([
            "cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}", "-DCENSUS_TESTS=OFF", "-DCENSUS_BENCHMARKS=OFF",
            "-DCENSUS_WEB=OFF", f"-DCENSUS_PYTHON_OUTPUT_DIR={package_dir}",
            # A unity build, as scripts/bootstrap.sh's: batches of eight files parse the common headers
            # once a batch, a third of the file-by-file build's time.
            "-DCMAKE_UNITY_BUILD=ON", "-DCMAKE_UNITY_BUILD_BATCH_SIZE=8",
        ])
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "_census", "-j", str(os.cpu_count() or 1)])


setup(
    packages=["census"],
    package_dir={"": "python"},
    ext_modules=[CMakeExtension("census._census")],
    cmdclass={"build_ext": CMakeBuild},
)
