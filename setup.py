"""pip's entry into ringd's build (pyproject.toml names setuptools).

`pip install .` compiles the extension ringd._ringd with libringd inside it,
and the programs ringd, ring-launch and ring-bench, from the source lists of
Makefile.am (python/build_support reads them): the same sources and flags as
`./configure && make`, without autotools or root. docs/install.md says how to
build wheels and install offline."""

import os
import sys

from setuptools import Extension, setup

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from build_support.build_ringd import BuildRingd, package_version  # noqa: E402


def _setuptools_major():
    import setuptools
    return int(setuptools.__version__.split(".")[0])


setup(
    version=package_version(),
    # an SPDX expression where setuptools knows them (77+), the older field elsewhere
    **({"license_expression": "Apache-2.0"} if _setuptools_major() >= 77 else
       {"license": "Apache-2.0"}),
    # the sources are compiled by BuildRingd from Makefile.am's lists
    ext_modules=[Extension("ringd._ringd", sources=[])],
    cmdclass={"build_ext": BuildRingd},
)
