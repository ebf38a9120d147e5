"""site.yaml: the documented shape is read; hostile or malformed input is refused naming its key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vigil.installer.reports import ReportInputError, field_list, load_site

GOOD = """\
name: HPC Centre North
owner: Example University
operator: Example University Computing Centre
contact: dc-report@example.org
location: Espoo, Finland
type: enterprise
start_of_operation: 2019-03-01
installed_it_power_kw: 800
meters:
  it_energy:
    - selector: 'site_pdu_energy_joules_total{circuit="it"}'
      unit: J
  total_energy:
    - selector: 'site_facility_energy_kwh_total'
      unit: kWh
declared:
  water_input_m3: 5000
  potable_water_input_m3: 1200
  waste_heat_reused_kwh: 131400
  renewable_energy_kwh: 657000
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(text)
    return path


def test_the_documented_shape_is_read(tmp_path: Path) -> None:
    site = load_site(write(tmp_path, GOOD))
    assert site.information["name"] == "HPC Centre North"
    assert site.information["start_of_operation"] == "2019-03-01"
    assert site.declared == {
        "installed_it_power_kw": 800.0,
        "water_input_m3": 5000.0,
        "potable_water_input_m3": 1200.0,
        "waste_heat_reused_kwh": 131400.0,
        "renewable_energy_kwh": 657000.0,
    }
    assert [(m.selector, m.unit) for m in site.meters["it_energy"]] == [
        ('site_pdu_energy_joules_total{circuit="it"}', "J")
    ]


def test_the_issue_example_without_information_is_read(tmp_path: Path) -> None:
    text = GOOD.split("installed_it_power_kw", 1)[1]
    site = load_site(write(tmp_path, "name: x\ninstalled_it_power_kw" + text))
    assert site.information == {"name": "x"}


@pytest.mark.parametrize(
    ("old", "new", "key", "reason"),
    [
        (
            "installed_it_power_kw: 800",
            "installed_it_power_kw: lots",
            "installed_it_power_kw",
            "must be a number",
        ),
        (
            "installed_it_power_kw: 800",
            "installed_it_power_kw: '800'",
            "installed_it_power_kw",
            "must be a number",
        ),
        (
            "installed_it_power_kw: 800",
            "installed_it_power_kw: true",
            "installed_it_power_kw",
            "must be a number",
        ),
        ("installed_it_power_kw: 800", "installed_it_power_kw: 1.0e+400", "installed_it_power_kw", "finite"),
        ("installed_it_power_kw: 800", "installed_it_power_kw: .nan", "installed_it_power_kw", "finite"),
        ("installed_it_power_kw: 800", "installed_it_power_kw: -.inf", "installed_it_power_kw", "finite"),
        (
            "installed_it_power_kw: 800",
            "installed_it_power_kw: " + "9" * 400,
            "installed_it_power_kw",
            "larger",
        ),
        ("installed_it_power_kw: 800", "installed_it_power_kw: 2.0e+15", "installed_it_power_kw", "larger"),
        ("installed_it_power_kw: 800", "installed_it_power_kw: -1", "installed_it_power_kw", "negative"),
        ("water_input_m3: 5000", "water_input_m3: [5000]", "declared.water_input_m3", "must be a number"),
        ("water_input_m3: 5000", "water_inptu_m3: 5000", "declared.water_inptu_m3", "unknown declared value"),
        ("unit: J", "unit: GJ", "meters.it_energy[0].unit", "unknown unit 'GJ'"),
        ("unit: J", "unit: j", "meters.it_energy[0].unit", "unknown unit 'j'"),
        ("unit: kWh", "unit: 3", "meters.total_energy[0].unit", "unknown unit 3"),
        ("      unit: J\n", "      unit: J\n      scale: 2\n", "meters.it_energy[0].scale", "unknown key"),
        (
            "selector: 'site_facility_energy_kwh_total'",
            "selector: 'sum(site_facility_energy_kwh_total)'",
            "meters.total_energy[0].selector",
            "series selector",
        ),
        (
            "selector: 'site_facility_energy_kwh_total'",
            "selector: 42",
            "meters.total_energy[0].selector",
            "series",
        ),
        ("  total_energy:", "  facility:", "meters.facility", "unknown meter"),
        ("type: enterprise", "type: hyperscale", "type", "must be one of"),
        ("name: HPC Centre North", "name: [a, b]", "name", "must be text"),
        ("name: HPC Centre North", 'name: "a\\nb"', "name", "one line"),
        ("installed_it_power_kw: 800", "installed_it_power_kw: 2e15", "installed_it_power_kw", "not '2e15'"),
        ("name: HPC Centre North", "name: '" + "x" * 600 + "'", "name", "one line"),
        ("start_of_operation: 2019-03-01", "start_of_operation: 2019-02-30", "start_of_operation", "date"),
        ("start_of_operation: 2019-03-01", "start_of_operation: 2019", "start_of_operation", "date"),
        ("owner: Example University", "ownr: Example University", "ownr", "unknown key"),
    ],
)
def test_malformed_values_are_refused_naming_the_key(
    tmp_path: Path, old: str, new: str, key: str, reason: str
) -> None:
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ReportInputError) as exc:
        load_site(path)
    assert exc.value.obj == f"{path}: {key}"
    assert reason in exc.value.reason


def test_meters_must_be_a_non_empty_list(tmp_path: Path) -> None:
    path = write(tmp_path, "meters:\n  it_energy: []\n")
    with pytest.raises(ReportInputError, match="non-empty list"):
        load_site(path)
    path = write(tmp_path, "meters:\n  it_energy: {selector: x, unit: J}\n")
    with pytest.raises(ReportInputError, match="non-empty list"):
        load_site(path)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("- a\n- b\n", "must be a mapping"),
        ("name: [unclosed\n", "not YAML: line"),
        ("", "must be a mapping"),
        ("a: !!python/object/apply:os.system ['true']\n", "not YAML"),
    ],
)
def test_files_that_are_not_a_site_are_refused(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(ReportInputError) as exc:
        load_site(write(tmp_path, text))
    assert reason in exc.value.reason


def test_not_a_file_too_big_or_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="not a file"):
        load_site(tmp_path)
    with pytest.raises(ReportInputError, match="not a file"):
        load_site(tmp_path / "absent.yaml")
    big = tmp_path / "big.yaml"
    big.write_text("name: " + "x" * (1 << 20) + "\n")
    with pytest.raises(ReportInputError, match="larger than"):
        load_site(big)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ReportInputError, match="not UTF-8"):
        load_site(latin)


def test_a_billion_laughs_is_refused_without_expanding(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x"]'] + [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 10)}]" for i in range(1, 9)]
    with pytest.raises(ReportInputError, match=r"its aliases \(YAML anchors and \*references\) expand it by"):
        load_site(write(tmp_path, "\n".join(lines) + "\n"))


def test_every_field_has_a_reference_and_every_unit_is_known() -> None:
    fields = field_list()
    assert all(f.reference for f in fields.information) and all(k.reference for k in fields.kpis)
    assert all(i.reference for i in fields.indicators)
    assert {i.key for i in fields.indicators} == {"pue", "wue", "erf", "ref"}
    assert {"it_energy_kwh", "total_energy_kwh"} <= {k.key for k in fields.kpis}
    assert set(fields.meters) == {"it_energy", "total_energy"}
    assert os.path.basename(__file__)  # the data file is read from the installed package, not the tree


def test_the_site_names_its_time_zone_or_is_refused_naming_the_key(tmp_path: Path) -> None:
    good = tmp_path / "site.yaml"
    good.write_text("name: Test DC\ntimezone: Europe/Berlin\n")
    assert load_site(good).timezone == "Europe/Berlin"
    good.write_text("name: Test DC\n")
    assert load_site(good).timezone == "UTC"
    for value, reason in (
        ("Mars/Base", "unknown to this host's time zone database"),
        ("[1]", "must be an IANA"),
    ):
        bad = tmp_path / "bad.yaml"
        bad.write_text(f"name: Test DC\ntimezone: {value}\n")
        with pytest.raises(ReportInputError) as err:
            load_site(bad)
        assert str(err.value).startswith(f"{bad}: timezone: ") and reason in str(err.value)
