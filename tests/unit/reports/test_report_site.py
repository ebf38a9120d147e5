"""site.yaml: the documented shape is read; hostile or malformed input is refused naming its key."""

from __future__ import annotations

import os
import re
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
    assert set(fields.meters) == {"it_energy", "total_energy", "backup_generator_energy"}
    assert os.path.basename(__file__)  # the data file is read from the installed package, not the tree


#: a reference names a point of an annex, an article, or says the texts do not ask for the field
_POINT = re.compile(
    r"(Delegated Regulation \(EU\) 2024/1364 (Annex (I|II|III), point \d?\(?[a-z0-9]\)?[(a-z)]*|Art\. \d)"
    r"|Directive \(EU\) 2023/1791 (Annex VII\([abc]\)|Art\. 12)|not required by the texts)"
)


def test_every_reference_names_the_point_of_the_text_that_asks_for_it() -> None:
    fields = field_list()
    for f in (*fields.information, *fields.kpis, *fields.indicators):
        assert _POINT.match(f.reference), (f.key, f.reference)
    refs = {f.key: f.reference for f in (*fields.information, *fields.kpis, *fields.indicators)}
    # the points read in the Official Journal's text (docs/reports.md, "Fields and references")
    dr = "Delegated Regulation (EU) 2024/1364"
    assert refs["lau_code"] == "Delegated Regulation (EU) 2024/1364 Annex I, point 1(c)"
    assert refs["total_energy_kwh"].startswith("Delegated Regulation (EU) 2024/1364 Annex II, point 1(d)")
    assert refs["backup_generator_energy_kwh"] == "Delegated Regulation (EU) 2024/1364 Annex II, point 1(d)"
    assert refs["intake_air_setpoint_c"].startswith(f"{dr} Annex II, point 1(l)")
    assert refs["pue"] == "Delegated Regulation (EU) 2024/1364 Art. 4 and Annex III, point (a)"
    assert [f.key for f in fields.kpis if f.parts] == ["renewable_energy_kwh"]


def test_renewable_energy_is_the_sum_of_its_parts_or_refused(tmp_path: Path) -> None:
    parts = (
        "declared:\n  renewable_guarantees_of_origin_kwh: 600000\n  renewable_ppa_kwh: 50000\n"
        "  renewable_on_site_kwh: 7000\n"
    )
    site = load_site(write(tmp_path, "name: x\n" + parts + "  renewable_energy_kwh: 657000\n"))
    assert site.declared["renewable_energy_kwh"] == 657000
    with pytest.raises(ReportInputError) as err:
        load_site(write(tmp_path, "name: x\n" + parts + "  renewable_energy_kwh: 700000\n"))
    assert str(err.value) == (
        f"{tmp_path / 'site.yaml'}: declared.renewable_energy_kwh: 700000 is not the sum of "
        "renewable_guarantees_of_origin_kwh + renewable_ppa_kwh + renewable_on_site_kwh (657000)"
    )


def test_a_measured_kpi_that_may_be_declared_takes_a_meter_or_a_number_not_both(tmp_path: Path) -> None:
    site = load_site(write(tmp_path, "declared:\n  backup_generator_energy_kwh: 1200\n"))
    assert site.declared["backup_generator_energy_kwh"] == 1200
    both = (
        "declared:\n  backup_generator_energy_kwh: 1200\nmeters:\n  backup_generator_energy:\n"
        "    - selector: 'genset_energy_kwh_total'\n      unit: kWh\n"
    )
    with pytest.raises(ReportInputError, match="give meters.backup_generator_energy or declared"):
        load_site(write(tmp_path, both))
    with pytest.raises(ReportInputError, match="unknown declared value"):
        load_site(write(tmp_path, "declared:\n  it_energy_kwh: 5\n"))  # E_IT is measured, always


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


def test_the_report_gives_traffic_in_the_acts_unit_and_names_a_missing_measurement_point(
    tmp_path: Path,
) -> None:
    from vigil.installer.reports import energy_document, year_period

    site = load_site(
        write(
            tmp_path,
            "e_it_measurement_point: specified\ndeclared:\n  incoming_traffic_tb: 1200\n"
            "  backup_generator_energy_kwh: 0\n",
        )
    )
    doc = energy_document(
        site=site,
        fields=field_list(),
        period=year_period(2025),
        readings={},
        gpu=None,
        gpu_monthly_joules={},
        gpu_note="none",
        vm_url="http://127.0.0.1:8428",
    )
    assert doc["kpis"]["incoming_traffic_tb"]["act_value"] == 0.0012
    assert doc["kpis"]["incoming_traffic_tb"]["act_unit"] == "EB"
    missing = {m["field"]: m for m in doc["missing"]}
    assert "e_it_measurement_point_description" in missing and "backup_generator_energy_kwh" not in missing
    assert missing["it_energy_kwh"]["site_key"] == "meters.it_energy"
    assert missing["renewable_energy_kwh"]["site_key"] == "declared.renewable_energy_kwh"


def test_the_documented_example_gives_every_mandatory_field(tmp_path: Path) -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "reports.md").read_text()
    example = re.search(r"```yaml\n(name: HPC Centre North.*?)```", docs, re.S)
    assert example is not None
    site = load_site(write(tmp_path, example.group(1)))
    fields = field_list()
    given = set(site.information) | set(site.declared) | {f"meters.{m}" for m in site.meters}
    for f in fields.information:
        assert not f.mandatory or f.key in given, f.key
    for k in fields.kpis:
        if k.mandatory and k.key not in given and not (k.parts and all(p in given for p in k.parts)):
            assert f"meters.{k.meter}" in given, k.key
