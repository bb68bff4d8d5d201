"""The package's version (a leaf module: code inside testbed reads it without importing
the package, which imports almost everything)."""

__version__ = "0.2.0"
