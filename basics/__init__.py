"""The shared basics every vigil package builds on, and nothing else.

- :mod:`vigil.basics.errors`: :class:`VigilError`, the one base of every error shown to an operator;
- :mod:`vigil.basics.atomic`: stage, then rename — files that are never seen half-written;
- :mod:`vigil.basics.canonical`: the one canonical JSON byte form that digests and signatures cover;
- :mod:`vigil.basics.bounded`: YAML and JSON files an operator hands vigil, read within bounds (size,
  alias expansion, nesting), and :func:`~vigil.basics.bounded.shown`, a bounded ``repr()`` for messages.

This package imports nothing from the rest of vigil (an import-linter contract checks it).
"""
