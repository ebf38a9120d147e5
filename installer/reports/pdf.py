"""The PDF rendering of a report for people: tables and plots, a pure function of the signed JSON.

vigil lays the pages out here (the same layout as its earlier hand-written PDF 1.4 writer) and typst
(the ``typst`` wheel: its compiler and its fonts, no system font read) draws them from
``data/report.typ``: PDF/A-2b with the font embedded, so names in every EU language print as they are
(Libertinus Serif: Latin with its extensions, Greek, Cyrillic). The layout goes to typst as JSON in
``sys.inputs``, and every string in it is drawn as text, never read as typst markup or code. The same
JSON gives the same bytes with the same typst: no system fonts, typst's document ID a hash of the
document, its date the end of the report's period. A character that is not printable, or that the
font lacks (outside European scripts: :data:`FONT_RANGES`), prints as ``?``; the JSON, not the PDF,
is the record, and every page's footer names its SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from datetime import datetime
from importlib import resources
from typing import Any, Final

import typst

from vigil.basics.canonical import canonical_json
from vigil.installer.reports.errors import ReportError

PAGE_W, PAGE_H = 595, 842  # A4, in points
MARGIN = 48
FOOTER = 28
BODY = 8.5
#: the PDF standard typst writes (PDF/A-2b: archival, every font embedded, colours with an ICC profile)
PDF_STANDARD: Final = "a-2b"

# Helvetica's advance widths (1/1000 em) for the printable ASCII characters, from its AFM: the layout's
# estimate of a text's width (wider than Libertinus Serif's); typst cuts a text that is still too
# wide for its place to its real width. The bold face is about 5 % wider.
_ASCII_WIDTHS = (
    "278 278 355 556 556 889 667 191 333 333 389 584 278 333 278 278 556 556 556 556 556 556 556 556 "
    "556 556 278 278 584 584 584 556 1015 667 667 722 722 667 611 778 722 278 500 667 556 833 722 "
    "778 667 778 722 667 611 722 667 944 667 667 611 278 278 278 469 556 333 556 556 500 556 556 278 "
    "556 556 222 222 500 222 833 556 556 556 556 333 500 278 556 500 722 500 500 500 334 260 334 584"
)
_WIDTHS = {chr(32 + i): int(w) for i, w in enumerate(_ASCII_WIDTHS.split())}
#: fill colours of a chart's series, in order (RGB 0..1)
_COLOURS = ((0.16, 0.38, 0.62), (0.85, 0.50, 0.13), (0.30, 0.60, 0.30), (0.55, 0.35, 0.65))
#: a text estimated at more than this share of its place is measured by typst, and cut if need be
_MEASURE_ABOVE = 0.7
#: a text is handed to typst cut at this many times its place's estimated width (a bound on its length)
_KEEP_UP_TO = 1.5
_TEMPLATE = "data/report.typ"


#: the code points the embedded Libertinus Serif draws, as ranges: Latin with its extensions and
#: combining marks, Greek, Cyrillic, the common punctuation, the euro sign. Anything else prints as
#: ``?``: typst draws with this font alone (``fallback: false``), and under PDF/A it refuses a
#: character the font lacks, so one account named in another script would fail every usage report.
#: Found by drawing each character with typst 0.15.2's Libertinus Serif; a test draws all of them
#: under PDF/A (tests/unit/reports/test_report_pdf.py), and a typst upgrade that loses one fails it.
FONT_RANGES = (
    (0x20, 0x7E),
    (0xA0, 0x36F),
    (0x370, 0x3FF),
    (0x400, 0x4FF),
    (0x1E00, 0x1EFF),
    (0x1F00, 0x1FFF),
    (0x2010, 0x2037),
    (0x20AC, 0x20AC),
)
#: inside those ranges, what the font lacks
FONT_GAPS = frozenset(
    (
        *(0x1E9C, 0x1E9D, 0x1E9F, *range(0x1EFA, 0x1F00)),
        *range(0x2E5, 0x2EA),
        *(0x370, 0x371, 0x372, 0x373, 0x376, 0x377, 0x37F, 0x3CF, *range(0x3E2, 0x3F0), 0x3F7, 0x3FA, 0x3FC),
        *(0x460, 0x461, *range(0x464, 0x470), *range(0x478, 0x490), 0x4C5, 0x4C6, 0x4CD, 0x4CE, 0x4CF),
        *range(0x4FA, 0x500),
    )
)


def drawable(c: str) -> bool:
    """Whether the PDF's font draws ``c``: printable, in :data:`FONT_RANGES` and not a gap in them;
    a combining mark only from the combining diacritical marks (U+0300-U+036F)."""
    code = ord(c)
    if not c.isprintable() or code in FONT_GAPS:
        return False
    if unicodedata.category(c).startswith("M") and not 0x300 <= code <= 0x36F:
        return False
    return any(lo <= code <= hi for lo, hi in FONT_RANGES)


def _ascii(value: Any) -> Any:
    """The layout with every string's non-ASCII characters as ``?`` (the last resort, should a
    sequence of drawable characters still be refused)."""
    if isinstance(value, str):
        return "".join(c if " " <= c <= "~" else "?" for c in value)
    if isinstance(value, list):
        return [_ascii(v) for v in value]
    if isinstance(value, dict):
        return {k: _ascii(v) for k, v in value.items()}
    return value


def _clean(text: Any) -> str:
    return "".join(c if drawable(c) else "?" for c in str(text))


def text_width(text: str, size: float, bold: bool = False) -> float:
    width = sum(_WIDTHS.get(c, 556) for c in text) * size / 1000
    return width * 1.05 if bold else width


def _n(value: float) -> float:
    """A coordinate: two decimals at most, no negative zero."""
    return round(value, 2) + 0.0


def _cut(text: str, width: float, size: float, bold: bool = False) -> str:
    """The start of ``text`` whose estimated width is at most ``width`` (one pass: bounded time)."""
    scale = size / 1000 * (1.05 if bold else 1.0)
    used = 0.0
    for i, c in enumerate(text):
        used += _WIDTHS.get(c, 556) * scale
        if used > width:
            return text[:i]
    return text


def _fit(text: str, width: float, size: float, bold: bool = False) -> str:
    """``text`` cut to its place by the estimate, with ``...`` (for the layout's own decisions)."""
    text = _clean(text)
    if text_width(text, size, bold) <= width:
        return text
    return _cut(text, width - text_width("...", size, bold), size, bold) + "..."


def number(value: Any, decimals: int = 3) -> str:
    """A figure as people read it: thousands separated, a fixed number of decimals, ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{decimals}f}"
    return _clean(value)


def _percent(ratio: Any) -> str:
    return "-" if not isinstance(ratio, (int, float)) else f"{ratio * 100:.2f} %"


def _nice_ceiling(value: float) -> float:
    if value <= 0:
        return 1.0
    exp = 10.0 ** math.floor(math.log10(value))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * exp >= value:
            return m * exp
    return 10 * exp  # pragma: no cover - the loop always returns


class Pdf:
    """Pages of drawing operations, laid out top to bottom; ``to_bytes`` has typst draw them."""

    def __init__(self, title: str) -> None:
        self.title = _clean(title)
        self.pages: list[list[list[Any]]] = []
        self.ops: list[list[Any]] = []
        self.y = 0.0
        self.new_page()

    def new_page(self) -> None:
        self.ops = []
        self.pages.append(self.ops)
        self.y = PAGE_H - MARGIN

    def need(self, height: float) -> None:
        if self.y - height < MARGIN + FOOTER:
            self.new_page()

    # --- drawing --------------------------------------------------------------------------------

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: float = BODY,
        bold: bool = False,
        align: str = "left",
        width: float | None = None,
    ) -> None:
        """``text`` on the baseline ``y``, left of, right of or centred on ``x``; with ``width``, cut to
        that many points (``...`` at its end) by the font's real widths."""
        text = _clean(text)
        if not text:
            return
        measure = None
        if width is not None:
            text = _cut(text, width * _KEEP_UP_TO, size, bold)
            if text_width(text, size, bold) > width * _MEASURE_ABOVE or not text.isascii():
                measure = _n(width)
        self.ops.append(["t", _n(x), _n(y), _n(size), bold, align[0], text, measure])

    def line(self, x1: float, y1: float, x2: float, y2: float, width: float = 0.5, gray: float = 0) -> None:
        self.ops.append(["l", _n(x1), _n(y1), _n(x2), _n(y2), _n(width), _n(gray)])

    def rect(self, x: float, y: float, w: float, h: float, rgb: tuple[float, float, float]) -> None:
        self.ops.append(["r", _n(x), _n(y), _n(w), _n(h), [_n(c) for c in rgb]])

    # --- blocks ---------------------------------------------------------------------------------

    def heading(self, text: str, size: float = 12) -> None:
        self.need(size + 40)
        self.y -= size + 8
        self.text(MARGIN, self.y, text, size, bold=True, width=PAGE_W - 2 * MARGIN)
        self.y -= 6

    def paragraph(self, text: str, size: float = BODY) -> None:
        """Text wrapped at word boundaries to the page's width (a word wider than that is cut)."""
        width = PAGE_W - 2 * MARGIN
        line = ""
        for word in _clean(text).split():
            word = _cut(word, width * _KEEP_UP_TO, size)
            trial = f"{line} {word}" if line else word
            if line and text_width(trial, size) > width:
                self._line_of_text(line, size)
                line = word
            else:
                line = trial
        if line:
            self._line_of_text(line, size)
        self.y -= 3

    def _line_of_text(self, text: str, size: float) -> None:
        self.need(size + 4)
        self.y -= size + 3
        self.text(MARGIN, self.y, text, size, width=PAGE_W - 2 * MARGIN)

    def table(
        self,
        columns: list[tuple[str, float, str]],
        rows: list[tuple[bool, list[str]]],
        size: float = 8,
    ) -> None:
        """``columns``: (header, share of the page's width, ``left``/``right``); ``rows``: (bold, cells).
        The header is repeated on every page the table reaches."""
        total = PAGE_W - 2 * MARGIN
        widths = [share * total for _, share, _ in columns]
        step = size + 4.5

        def header() -> None:
            self.y -= step
            self._row([c[0] for c in columns], columns, widths, size, bold=True)
            self.line(MARGIN, self.y - 2.5, PAGE_W - MARGIN, self.y - 2.5, 0.6)

        self.need(2 * step + 4)
        header()
        for bold, cells in rows:
            if self.y - step < MARGIN + FOOTER:
                self.new_page()
                header()
            self.y -= step
            self._row(cells, columns, widths, size, bold)
        self.y -= 8

    def _row(
        self,
        cells: list[str],
        columns: list[tuple[str, float, str]],
        widths: list[float],
        size: float,
        bold: bool,
    ) -> None:
        x = float(MARGIN)
        for cell, (_, _, align), width in zip(cells, columns, widths, strict=True):
            if align == "right":
                self.text(x + width - 3, self.y, cell, size, bold, align="right", width=width - 6)
            else:
                self.text(x + 3, self.y, cell, size, bold, width=width - 6)
            x += width

    def bar_chart(
        self,
        title: str,
        categories: list[str],
        series: list[tuple[str, list[float]]],
        unit: str,
        height: float = 160,
    ) -> None:
        """Grouped bars, one group per category and one bar per series; a value axis from 0 to a round
        ceiling with four grid lines, and a legend."""
        self.need(height + 70)
        self.y -= 14
        self.text(MARGIN, self.y, f"{title} ({unit})", 10, bold=True, width=PAGE_W - 2 * MARGIN)
        top = self.y - 14
        bottom = top - height
        left, right = MARGIN + 56, PAGE_W - MARGIN
        peak = max((v for _, values in series for v in values), default=0.0)
        ceiling = _nice_ceiling(peak)
        for i in range(5):
            y = bottom + height * i / 4
            self.line(left, y, right, y, 0.3, 0.8)
            self.text(left - 6, y - 2.5, number(ceiling * i / 4, 2 if ceiling < 10 else 0), 7, align="right")
        groups = max(len(categories), 1)
        group_w = (right - left) / groups
        bar_w = min(group_w * 0.8 / max(len(series), 1), 36.0)
        for i, category in enumerate(categories):
            x0 = left + i * group_w + (group_w - bar_w * len(series)) / 2
            for j, (_, values) in enumerate(series):
                value = max(values[i], 0.0)
                if value > 0:
                    self.rect(
                        x0 + j * bar_w, bottom, bar_w, height * value / ceiling, _COLOURS[j % len(_COLOURS)]
                    )
            label_x = left + (i + 0.5) * group_w
            self.text(label_x, bottom - 9, category, 6.5, align="center", width=group_w - 2)
        self.line(left, bottom, right, bottom, 0.6)
        x = float(left)
        legend_y = bottom - 22
        for j, (name, _) in enumerate(series):
            self.rect(x, legend_y - 1, 7, 7, _COLOURS[j % len(_COLOURS)])
            shown = _fit(name, 120, 7.5)
            self.text(x + 10, legend_y, shown, 7.5, width=120)
            x += 10 + text_width(shown, 7.5) + 16
        self.y = legend_y - 12

    # --- the file -------------------------------------------------------------------------------

    def to_bytes(self, footer: str, date: int) -> bytes:
        """The PDF, dated ``date`` (seconds since the epoch: PDF/A requires a date)."""
        count = len(self.pages)
        for i, ops in enumerate(self.pages, start=1):
            self.ops = ops
            self.line(MARGIN, MARGIN + 12, PAGE_W - MARGIN, MARGIN + 12, 0.3, 0.6)
            self.text(MARGIN, MARGIN, footer, 7, width=PAGE_W - 2 * MARGIN - 70)
            self.text(PAGE_W - MARGIN, MARGIN, f"page {i} of {count}", 7, align="right")
        layout = {"title": self.title, "pages": self.pages}
        template = resources.files("vigil.installer.reports").joinpath(_TEMPLATE)
        with resources.as_file(template) as path:
            for attempt in (layout, _ascii(layout)):
                data = json.dumps(attempt, ensure_ascii=False, separators=(",", ":"))
                try:
                    return bytes(
                        typst.compile(
                            str(path),
                            root=str(path.parent),
                            ignore_system_fonts=True,
                            sys_inputs={"data": data},
                            pdf_standards=[PDF_STANDARD],
                            pdf_tags=False,
                            timestamp=date,
                        )
                    )
                except typst.TypstError as e:
                    if attempt is layout and "could not be displayed" in e.message:
                        continue  # the font lacks a glyph FONT_RANGES let through: draw ASCII only
                    raise ReportError(self.title, f"typst could not draw the PDF: {e.message}") from None
        raise AssertionError("unreachable")


# --- the two reports ------------------------------------------------------------------------------


def _period_lines(pdf: Pdf, doc: dict[str, Any], digest: str) -> None:
    p = doc["period"]
    zone = p.get("timezone", "UTC")
    when = f"Period {p['label']}: {p['start']} to {p['end']} ({zone})"
    if "start_local" in p:
        when += f", local time {p['start_local']} to {p['end_local']}"
    pdf.paragraph(when + ("." if p.get("complete", True) else "; in progress, figures up to its end."))
    pdf.paragraph(f"SHA-256 of report.json: {digest}. Generated by {doc.get('generator', 'vigil')}.")
    pdf.paragraph(
        "This PDF is a rendering of report.json for reading; the signed JSON is the record "
        "(verify it with `minisign -V -m report.json -p report.pub`)."
    )


def usage_pdf(doc: dict[str, Any], digest: str) -> Pdf:
    label = doc["period"]["label"]
    pdf = Pdf(f"vigil usage report {label}")
    pdf.heading(f"GPU usage report {label}", 16)
    _period_lines(pdf, doc, digest)
    src = doc.get("source", {})
    account = (doc.get("filter") or {}).get("account")
    tail = src.get("raw_partial_hour_s") or 0
    pdf.paragraph(
        f"Read from {src.get('victoriametrics', '?')}: {number(src.get('recorded_hours'))} whole hours from "
        f"the accounting recording rules, {number(src.get('raw_hours'))} from the raw series, "
        f"{number(src.get('hours_without_data'))} without GPU data"
        + (f"; and the hour in progress ({number(tail // 60)} min) from the raw series." if tail else ".")
        + (f" Only account {account}." if account else "")
    )
    totals = doc.get("totals", {})
    pdf.paragraph(
        f"Totals: {number(totals.get('gpu_hours'))} GPU-hours, {number(totals.get('gpu_energy_kwh'))} kWh "
        f"of GPU energy, jobs: {number(totals.get('jobs'))}."
        + (
            f" Active: {number(totals['active_gpu_hours'])} GPU-hours (the GPU busy above "
            f"{doc['active']['threshold'] * 100:g} %)."
            if "active_gpu_hours" in totals and "active" in doc
            else ""
        )
    )
    c = doc.get("cluster")
    if c:
        holds = c["conservation"]["holds"]
        pdf.paragraph(
            f"The GPUs measured {number(c['measured_gpu_energy_kwh'])} kWh: "
            f"{number(c['charged_gpu_energy_kwh'])} charged to accounts and "
            f"{number(c['unallocated_gpu_energy_kwh'])} unallocated (idle GPUs and MIG slices); "
            f"{number(c['measured_gpu_hours'])} GPU-hours scraped: "
            f"{number(c['charged_gpu_hours'])} charged and {number(c['unallocated_gpu_hours'])} unallocated. "
            + (
                f"Charged and unallocated add up to what was measured within "
                f"{c['conservation']['tolerance'] * 100:g} %."
                if holds
                else "THESE FIGURES DO NOT ADD UP to what was measured (the JSON's cluster.conservation)."
            )
        )
    alloc = "allocations" in doc
    if alloc:
        columns = [
            ("Account", 0.2, "left"),
            ("User", 0.16, "left"),
            ("GPU-hours", 0.14, "right"),
            ("GPU energy (kWh)", 0.16, "right"),
            ("Jobs", 0.1, "right"),
            ("Awarded", 0.12, "right"),
            ("Balance", 0.12, "right"),
        ]
    else:
        columns = [
            ("Account", 0.26, "left"),
            ("User", 0.22, "left"),
            ("GPU-hours", 0.18, "right"),
            ("GPU energy (kWh)", 0.2, "right"),
            ("Jobs", 0.14, "right"),
        ]
    rows: list[tuple[bool, list[str]]] = []
    for a in doc["accounts"]:
        cells = [a["account"], "", number(a["gpu_hours"]), number(a["gpu_energy_kwh"]), number(a["jobs"])]
        if alloc:
            cells += [number(a.get("awarded_gpu_hours")), number(a.get("balance_gpu_hours"))]
        rows.append((True, cells))
        for u in a["users"]:
            cells = ["", u["user"], number(u["gpu_hours"]), number(u["gpu_energy_kwh"]), number(u["jobs"])]
            rows.append((False, cells + (["", ""] if alloc else [])))
    pdf.heading("Per account and user", 11)
    pdf.table(columns, rows)
    if doc.get("gpu_models"):
        pdf.heading("Per GPU model", 11)
        pdf.table(
            [
                ("GPU model", 0.4, "left"),
                ("GPU-hours", 0.2, "right"),
                ("Active GPU-hours", 0.2, "right"),
                ("GPU energy (kWh)", 0.2, "right"),
            ],
            [
                (
                    False,
                    [
                        m["model"] or "(none)",
                        number(m["gpu_hours"]),
                        number(m["active_gpu_hours"]),
                        number(m["gpu_energy_kwh"]),
                    ],
                )
                for m in doc["gpu_models"]
            ],
        )
    rec = doc.get("reconciliation")
    if rec:
        _reconciliation(pdf, rec)
    largest = sorted(doc["accounts"], key=lambda a: (-a["gpu_hours"], a["account"]))[:20]
    if largest:
        title = "GPU-hours per account" + (" (the 20 largest)" if len(doc["accounts"]) > 20 else "")
        series = [("GPU-hours", [float(a["gpu_hours"]) for a in largest])]
        if alloc:
            series.append(("awarded", [float(a.get("awarded_gpu_hours") or 0.0) for a in largest]))
        pdf.bar_chart(title, [a["account"] for a in largest], series, "GPU-h")
    return pdf


#: differing jobs the PDF lists (the JSON has them all)
PDF_JOBS = 200


def _reconciliation(pdf: Pdf, rec: dict[str, Any]) -> None:
    t = rec["totals"]
    pdf.heading("Reconciliation with Slurm's accounting", 11)
    floor_min = float(rec["floor_gpu_hours_per_gpu"]) * 60
    pdf.paragraph(
        f"Slurm's accounting (sacct, file SHA-256 {rec['source']['sacct_sha256']}) gives "
        f"{number(t['slurm_gpu_hours'])} GPU-hours: AllocTRES gres/gpu times the time held, cut at the "
        f"period's edges. The meters show {number(t['metered_gpu_hours'])} device-hours: each GPU or MIG "
        f"instance a job's series are on. {number(t['jobs_differing'])} of {number(t['jobs'])} jobs "
        f"differ by more than {rec['threshold'] * 100:g} % and more than {number(floor_min, 0)} minutes "
        "per GPU."
    )
    pdf.table(
        [
            ("Account", 0.4, "left"),
            ("Slurm GPU-hours", 0.2, "right"),
            ("Metered", 0.2, "right"),
            ("Jobs", 0.2, "right"),
        ],
        [
            (
                False,
                [
                    a["account"],
                    number(a["slurm_gpu_hours"]),
                    number(a["metered_gpu_hours"]),
                    number(a["jobs"]),
                ],
            )
            for a in rec["accounts"]
        ],
    )
    if rec["jobs"]:
        pdf.table(
            [
                ("Job", 0.12, "left"),
                ("Account", 0.16, "left"),
                ("Slurm", 0.1, "right"),
                ("Metered", 0.1, "right"),
                ("Why", 0.52, "left"),
            ],
            [
                (
                    False,
                    [
                        j["job"],
                        j["account"],
                        number(j["slurm_gpu_hours"]),
                        number(j["metered_gpu_hours"]),
                        f"{j['state']}: {j['reason'] or 'not known'}",
                    ],
                )
                for j in rec["jobs"][:PDF_JOBS]
            ],
        )
        if len(rec["jobs"]) > PDF_JOBS:
            pdf.paragraph(f"... and {len(rec['jobs']) - PDF_JOBS} more jobs in the report's JSON.")


def energy_pdf(doc: dict[str, Any], digest: str) -> Pdf:
    label = doc["period"]["label"]
    pdf = Pdf(f"vigil energy report {label}")
    pdf.heading(f"Data centre energy report {label}", 16)
    pdf.paragraph(str(doc.get("act", "")))
    _period_lines(pdf, doc, digest)
    pdf.heading("Information about the data centre", 11)
    pdf.table(
        [("Field", 0.28, "left"), ("Value", 0.4, "left"), ("Reference", 0.32, "left")],
        [(False, [k, number(v["value"]), v["reference"]]) for k, v in doc["site"].items()],
    )
    pdf.heading("Key performance indicators", 11)
    pdf.table(
        [
            ("Field", 0.3, "left"),
            ("Value", 0.16, "right"),
            ("Unit", 0.1, "left"),
            ("Source", 0.12, "left"),
            ("Reference", 0.32, "left"),
        ],
        [
            (False, [k, number(v["value"]), v["unit"], v["source"], v["reference"]])
            for k, v in doc["kpis"].items()
        ],
    )
    pdf.heading("Indicators", 11)
    rows = []
    for key, ind in doc["indicators"].items():
        value = number(ind.get("value"))
        if ind.get("value") is None:
            value = (
                "missing " + ", ".join(ind["missing"]) if ind.get("missing") else ind.get("undefined", "-")
            )
        rows.append((False, [key, value, ind["unit"], ind.get("formula", ""), ind["reference"]]))
    pdf.table(
        [
            ("Indicator", 0.1, "left"),
            ("Value", 0.2, "right"),
            ("Unit", 0.1, "left"),
            ("Formula", 0.28, "left"),
            ("Reference", 0.32, "left"),
        ],
        rows,
    )
    pdf.heading("Mandatory fields the site did not give", 11)
    if doc["missing"]:
        pdf.table(
            [("Field", 0.4, "left"), ("Reference", 0.6, "left")],
            [(False, [m["field"], m["reference"]]) for m in doc["missing"]],
        )
    else:
        pdf.paragraph("None.")
    meters = [(name, m) for name, ms in doc.get("meters", {}).items() for m in ms]
    if meters:
        pdf.heading("Meters", 11)
        pdf.table(
            [
                ("Meter", 0.13, "left"),
                ("Selector", 0.39, "left"),
                ("Unit", 0.07, "left"),
                ("Series", 0.08, "right"),
                ("Resets", 0.08, "right"),
                ("kWh", 0.15, "right"),
                ("Coverage", 0.1, "right"),
            ],
            [
                (
                    False,
                    [
                        name,
                        m["selector"],
                        m["unit"],
                        number(m["series"]),
                        number(m["resets"]),
                        number(m["kwh"]),
                        number(m["coverage"]),
                    ],
                )
                for name, m in meters
            ],
        )
    operator = doc.get("operator", {})
    monthly = operator.get("monthly", [])
    # the site's meters together; the GPUs' energy, orders of magnitude smaller, on a scale of its own
    keys = sorted({k for row in monthly for k in row if k not in ("month", "gpu_energy_kwh")})
    labels = [row["month"] for row in monthly]
    for title, chosen in (("Energy per month", keys), ("GPU energy per month", ["gpu_energy_kwh"])):
        if monthly and chosen and any(k in row for row in monthly for k in chosen):
            pdf.bar_chart(
                title, labels, [(k, [float(row.get(k) or 0.0) for row in monthly]) for k in chosen], "kWh"
            )
    gpu = operator.get("gpu")
    pdf.heading("GPU energy (for the operator)", 11)
    if gpu is None:
        pdf.paragraph(f"No GPU figures: {operator.get('gpu_note') or 'no GPU data'}.")
    else:
        pdf.paragraph(
            f"GPU energy {number(gpu['gpu_energy_kwh'])} kWh; "
            f"share of E_IT: {_percent(gpu.get('gpu_share_of_it_energy'))}."
        )
        pdf.table(
            [("Account", 0.6, "left"), ("GPU energy (kWh)", 0.4, "right")],
            [(False, [a["account"], number(a["gpu_energy_kwh"])]) for a in gpu["gpu_energy_kwh_by_account"]],
        )
    return pdf


def render_pdf(doc: dict[str, Any]) -> bytes:
    """The PDF of a report document: the same JSON gives the same bytes."""
    data = canonical_json(doc)
    digest = hashlib.sha256(data).hexdigest()
    pdf = usage_pdf(doc, digest) if doc.get("kind") == "usage" else energy_pdf(doc, digest)
    kind = "usage" if doc.get("kind") == "usage" else "energy"
    footer = f"vigil {kind} report {doc['period']['label']} - sha256 {digest}"
    return pdf.to_bytes(footer, _date(doc))


def _date(doc: dict[str, Any]) -> int:
    """The PDF's date: the end of the report's period, the moment its figures reach (the JSON holds
    no generation time, so that the same figures give the same bytes)."""
    end = doc["period"]["end"]
    try:
        return int(datetime.fromisoformat(end).timestamp())
    except (TypeError, ValueError):
        raise ReportError(f"period {doc['period'].get('label')!r}", f"end {end!r} is not a time") from None
