"""Errors the lab reports."""

from __future__ import annotations

from vigil.basics.errors import VigilError


class LabError(VigilError):
    """The lab could not be built, started, reached or stopped."""


class LabPrerequisiteMissing(LabError):
    """A tool the lab needs is not installed, or the lab was not run as root."""

    outcome = "refused"


class LabRequestRefused(LabError):
    """A request the lab would not carry out as asked (a fault without its GPU, a negative rate, an
    unknown host or account): refused before anything is sent to a host."""

    outcome = "refused"
