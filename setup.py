"""Build of the compiled GRO fast path (pcapgro/_native.c), split's
segmenter (pcapgro/_gso.c), split --restore's record reader
(pcapgro/_restore.c) and the install path of the manual page.

Everything else is in pyproject.toml.  The extension is optional: without
a C compiler (or Python headers) the build goes on and pcapgro runs its
Python reference path instead (same output, slower; see pcapgro/gro/cfast.py).
"""

from setuptools import Extension, setup
from setuptools.dist import Distribution


class _Distribution(Distribution):
    """setuptools' editable_wheel installs data files only when the
    distribution answers ``has_data()`` (it asks for that name; Distribution
    calls it ``has_data_files``), so ``pip install -e .`` would leave the
    manual page out without this alias."""

    def has_data(self):
        return self.has_data_files()


setup(distclass=_Distribution,
      ext_modules=[Extension("pcapgro._native", ["pcapgro/_native.c"],
                             depends=["pcapgro/_annotate.h", "pcapgro/_crc32.h"],
                             extra_compile_args=["-O2", "-std=c99"], optional=True),
                   # the compiled segmenter of split (pcapgro/gso/cseg.py), optional too
                   Extension("pcapgro._gso", ["pcapgro/_gso.c"],
                             extra_compile_args=["-O2", "-std=c99"], optional=True),
                   # the compiled restore of split --restore (pcapgro/restore.py), optional too
                   Extension("pcapgro._restore", ["pcapgro/_restore.c"],
                             depends=["pcapgro/_crc32.h"],
                             extra_compile_args=["-O2", "-std=c99"], optional=True)],
      # the manual page where man(1) finds it for a bin/ on PATH
      # (<prefix>/share/man beside <prefix>/bin, a venv's too); pyproject's
      # [tool.setuptools] data-files is discouraged, so it is named here
      data_files=[("share/man/man1", ["man/pcapgro.1"])])
