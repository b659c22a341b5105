"""The package's version; equal to libopends's (meson.build's project
version), which the loader checks (python/tests/test_packaging.py checks
the sources agree)."""

__version__ = "0.1.0"
