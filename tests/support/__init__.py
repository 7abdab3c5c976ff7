"""Helpers the tests share, imported as a package (not through conftest)."""
