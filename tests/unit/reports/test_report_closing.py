"""Meter closings' own pieces: the remembered site, the months due, the agreement rule."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from vigil.installer.reports.closing import (
    agrees,
    ended_months,
    meters_sha256,
    remember_site,
    remembered_site,
    remembered_site_path,
)
from vigil.installer.reports.site import Meter, Site


def site(tmp_path: Path, unit: str = "kWh") -> Site:
    return Site(
        tmp_path / "site.yaml",
        meters={"it_energy": [Meter('pdu_energy{circuit="it"}', unit)], "total_energy": [Meter("dc", "J")]},
        timezone="Europe/Berlin",
    )


def test_the_remembered_site_round_trips_and_names_the_same_meters(tmp_path: Path) -> None:
    remember_site(tmp_path, site(tmp_path))
    back = remembered_site(tmp_path)
    assert back is not None and back.timezone == "Europe/Berlin"
    assert meters_sha256(back.meters) == meters_sha256(site(tmp_path).meters)
    assert meters_sha256(site(tmp_path, "Wh").meters) != meters_sha256(back.meters)
    assert oct(os.stat(remembered_site_path(tmp_path)).st_mode & 0o777) == "0o600"


def test_a_remembered_site_that_is_a_link_or_not_ours_is_ignored(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"meters": [], "timezone": "UTC"}')
    remembered_site_path(tmp_path).symlink_to(target)
    assert remembered_site(tmp_path) is None
    # writing it replaces the link, and never writes through it
    remember_site(tmp_path, site(tmp_path))
    assert not remembered_site_path(tmp_path).is_symlink()
    assert target.read_text() == '{"meters": [], "timezone": "UTC"}'
    for bad in ('{"meters": [{"meter": "x", "selector": "y", "unit": "BTU"}], "timezone": "UTC"}', "[", "{}"):
        remembered_site_path(tmp_path).write_text(bad)
        assert remembered_site(tmp_path) is None, bad


def test_months_due_are_whole_months_that_ended_inside_the_retention_window() -> None:
    now = datetime(2026, 12, 5, 1, 0, tzinfo=UTC).timestamp()
    labels = [m.label for m in ended_months("UTC", now)]
    assert labels[-1] == "2026-11" and "2026-12" not in labels
    assert labels[0] == "2025-11"  # 2025-10 began more than 400 days before now: partly gone
    berlin = ended_months("Europe/Berlin", datetime(2026, 11, 30, 23, 30, tzinfo=UTC).timestamp())
    assert berlin[-1].label == "2026-11"  # already December in Berlin


def test_samples_and_closing_agree_within_half_a_percent_or_one_wh() -> None:
    assert agrees(1000.0, 1004.9) and not agrees(1000.0, 1005.1)
    assert agrees(0.0, 0.001) and not agrees(0.0, 0.002)
