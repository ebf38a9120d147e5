"""The reports' errors. Each names the object (a period, a site file key, a meter, a stored report)
and the reason, so the front end prints one ``FAIL: <object>: <reason>`` line."""

from __future__ import annotations

from vigil.basics.errors import VigilError


class ReportError(VigilError):
    """A report could not be generated, stored, read or exported."""


class ReportInputError(ReportError):
    """The input was refused: a bad period, a malformed site file, an unknown unit, no data."""

    outcome = "refused"


class ReportVerifyError(ReportError):
    """A report file does not verify: its signature, its digest or its form is wrong."""

    outcome = "refused"
