"""lablib's version and the folder of the installed package: one place, importable by any
module without importing the package root (which imports nothing heavy, but sits on top)."""

import pathlib

__version__ = "0.3.0"

#: The folder of the running ``lablib`` package (a checkout's ``lablib/`` or site-packages).
PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
