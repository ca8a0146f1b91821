"""Build of the compiled GRO fast path (pcapgro/_native.c) and split's
segmenter (pcapgro/_gso.c).

Everything else is in pyproject.toml.  The extension is optional: without
a C compiler (or Python headers) the build goes on and pcapgro runs its
numpy fast path instead (same output, slower; see pcapgro/gro/cfast.py).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("pcapgro._native", ["pcapgro/_native.c"],
                             extra_compile_args=["-O2", "-std=c99"], optional=True),
                   # the compiled segmenter of split (pcapgro/gso/cseg.py), optional too
                   Extension("pcapgro._gso", ["pcapgro/_gso.c"],
                             extra_compile_args=["-O2", "-std=c99"], optional=True)])
