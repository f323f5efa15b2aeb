"""pip's build of the sluice package: `pip install .` (here or at the
repository root, whose setup.py runs this one) and `python3 -m build
--wheel` run CMake on the repository for three targets only, libsluice,
the extension (built with -DSLUICE_PYTHON_WHEEL=ON: its RUNPATH is
$ORIGIN) and sluice-feeder, and put them in the package:
sluice/_sluice.*.so beside sluice/libsluice.so.MAJOR, and
sluice/bin/sluice-feeder (which sluice.Feeder runs; it links no libsluice,
so it has no RUNPATH), so the wheel needs nothing of sluice outside
itself, only Debian's runtime libraries (docs/python.md, "With pip"). Offline: Debian's setuptools and wheel, with
--no-build-isolation (pip) or --no-isolation (build).

Environment: SLUICE_PIP_BUILD, the folder of the build's files
(setuptools' and, in SLUICE_PIP_BUILD/cmake, CMake's; kept between builds
so the next is incremental; default python/build), and CMake's own
(CMAKE_C_COMPILER_LAUNCHER=ccache, CMAKE_BUILD_PARALLEL_LEVEL, CC).
The version is the CMake project's (the top CMakeLists.txt), the one
libsluice reports (sluice.version).
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:  # setuptools' own build command where it has one (>= 62.4), else distutils'
    from setuptools.command.build import build
except ImportError:
    from distutils.command.build import build

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*sluice\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)", f.read())
    if m is None:
        raise RuntimeError("%s: no project(sluice VERSION X.Y.Z)" % os.path.join(ROOT, "CMakeLists.txt"))
    return m.group(1)


class CMakeBuild(build_ext):
    """Builds sluice._sluice with CMake instead of setuptools' compiler,
    and copies libsluice beside it and sluice-feeder into sluice/bin."""

    def build_extension(self, ext):
        build = os.path.join(BUILD_BASE, "cmake")
        os.makedirs(build, exist_ok=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        self.spawn(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DSLUICE_PYTHON_WHEEL=ON",
                    "-DSLUICE_WERROR=OFF", "-DPython3_EXECUTABLE=" + sys.executable])
        self.spawn(["cmake", "--build", build, "--target", "sluice_python", "sluice-feeder", "-j", jobs])
        built = glob.glob(os.path.join(build, "python", "sluice", "_sluice*.so"))
        if len(built) != 1:
            raise RuntimeError("CMake built %s, not one extension" % built)
        # libsluice by its SONAME (the name the extension asks for): a file,
        # not the build tree's links (a wheel holds no links)
        soname = subprocess.run(["readelf", "-d", built[0]], check=True, capture_output=True, text=True).stdout
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(libsluice\.so[^\]]*)\]", soname)
        if len(needed) != 1:
            raise RuntimeError("%s: needs %s, not one libsluice" % (built[0], needed))
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)
        shutil.copyfile(os.path.realpath(os.path.join(build, "client", needed[0])),
                        os.path.join(os.path.dirname(dest), needed[0]))
        # the feeder sluice.Feeder starts (find_feeder looks here first):
        # it links sluice's parts statically, so it needs no RUNPATH
        feeder = os.path.join(build, "feeder", "sluice-feeder")
        d = subprocess.run(["readelf", "-d", feeder], check=True, capture_output=True, text=True).stdout
        if re.search(r"\((RUNPATH|RPATH)\)|Shared library: \[libsluice", d):
            raise RuntimeError("%s: a RUNPATH or libsluice, which the package's copy cannot keep" % feeder)
        bindir = os.path.join(os.path.dirname(dest), "bin")
        os.makedirs(bindir, exist_ok=True)
        shutil.copyfile(feeder, os.path.join(bindir, "sluice-feeder"))
        os.chmod(os.path.join(bindir, "sluice-feeder"), 0o755)


class FreshBuild(build):
    """The package's staging folder emptied first: the build folder is
    kept between builds (CMake's objects are reused), and a file an earlier
    build staged there (a binary this one no longer makes) must not reach
    the wheel."""

    def run(self):
        shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()


# setuptools' build files (and its egg-info) go under python/build (or
# SLUICE_PIP_BUILD), never into the source folders nor the top build/ (a
# CMake build by the README)
BUILD_BASE = os.path.abspath(os.environ.get("SLUICE_PIP_BUILD") or os.path.join(HERE, "build"))
os.makedirs(BUILD_BASE, exist_ok=True)

setup(
    name="sluice",
    version=project_version(),
    description="Receive a sluice job's stream of batches from sluice feeders (numpy arrays, PyTorch tensors)",
    license="see the repository",
    python_requires=">=3.9",
    install_requires=["numpy"],
    extras_require={"torch": ["torch"]},
    packages=["sluice"],
    package_dir={"sluice": os.path.relpath(os.path.join(HERE, "sluice"))},
    package_data={"sluice": ["py.typed", "*.pyi"]},
    exclude_package_data={"sluice": ["*.c"]},
    ext_modules=[Extension("sluice._sluice", sources=[])],
    cmdclass={"build": FreshBuild, "build_ext": CMakeBuild},
    options={"build": {"build_base": BUILD_BASE},
             "egg_info": {"egg_base": BUILD_BASE}},
    zip_safe=False,
)
