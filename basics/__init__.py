"""The shared basics every vigil package builds on, and nothing else.

- :mod:`vigil.basics.errors`: :class:`VigilError`, the one base of every error shown to an operator;
- :mod:`vigil.basics.atomic`: stage, then rename — files that are never seen half-written;
- :mod:`vigil.basics.canonical`: the one canonical JSON byte form that digests and signatures cover.

This package imports nothing from the rest of vigil (an import-linter contract checks it).
"""
