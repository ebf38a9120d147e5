"""Helpers shared by every test directory: the `vigil` runner, releases, measured figures.

Unit, integration and lab tests may all import from here; nothing here imports from a test
directory, so a unit test never depends on integration or lab code.
"""
