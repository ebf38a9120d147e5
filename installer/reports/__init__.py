"""Usage and energy reports for auditors: read from VictoriaMetrics, canonical JSON, signed with the
appliance's report key in minisign's format, stored content-addressed (docs/reports.md).

- :mod:`.period`: report periods (month, quarter, year, days) and their exact boundaries (UTC or the
  site's time zone);
- :mod:`.usage`: GPU-hours, GPU energy and jobs per account and user (recording rules, raw series);
- :mod:`.sacct`: Slurm's own accounting (sacct's output), reconciled with the metered GPU-hours;
- :mod:`.counters`, :mod:`.energy`, :mod:`.site`, :mod:`.fields`: the Article 12 energy report;
- :mod:`.documents`, :mod:`.numbers`, :mod:`.render`, :mod:`.pdf`: the JSON documents, their number
  form, CSV and PDF;
- :mod:`.keys`, :mod:`.store`, :mod:`.verify`, :mod:`.export`: signing, the store, verification.

This is a domain package: it imports vigil.basics and vigil.bundle (minisign signing) only.
"""

from vigil.installer.reports.counters import Increase, counter_increase
from vigil.installer.reports.documents import (
    Billing,
    energy_document,
    imbalance,
    load_allocations,
    load_billing,
    usage_document,
)
from vigil.installer.reports.energy import MeterMonth, MeterReading, read_meter_month
from vigil.installer.reports.errors import ReportError, ReportInputError, ReportVerifyError
from vigil.installer.reports.export import export_report
from vigil.installer.reports.fields import FieldList, field_list
from vigil.installer.reports.keys import key_paths, report_key
from vigil.installer.reports.period import Period, clip_to_now, parse_period, parse_range, year_period
from vigil.installer.reports.render import render_csv
from vigil.installer.reports.site import UNITS, Site, load_site
from vigil.installer.reports.store import ReportStore, Stored
from vigil.installer.reports.usage import Usage, collect
from vigil.installer.reports.verify import Verified, load_pub, verify_file, verify_report
from vigil.installer.reports.vm import VictoriaMetrics

__all__ = [
    "Billing",
    "UNITS",
    "FieldList",
    "Increase",
    "MeterMonth",
    "MeterReading",
    "Period",
    "ReportError",
    "ReportInputError",
    "ReportStore",
    "ReportVerifyError",
    "Site",
    "Stored",
    "Usage",
    "Verified",
    "VictoriaMetrics",
    "clip_to_now",
    "collect",
    "counter_increase",
    "energy_document",
    "export_report",
    "field_list",
    "imbalance",
    "key_paths",
    "load_allocations",
    "load_billing",
    "load_pub",
    "load_site",
    "parse_period",
    "parse_range",
    "read_meter_month",
    "render_csv",
    "report_key",
    "usage_document",
    "verify_file",
    "verify_report",
    "year_period",
]
