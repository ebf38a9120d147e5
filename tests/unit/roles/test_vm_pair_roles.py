"""The monitoring pair (two hosts in `monitoring`, docs/ha.md) as the roles render it: vmagent on each
monitoring host writing to both VictoriaMetrics, VictoriaMetrics deduplicating and not scraping,
vmalert writing through the local vmagent; and the firewall letting each monitoring host reach the
other's VictoriaMetrics, and nothing more. One monitoring host: tests/unit/roles/test_roles_templates.py
(its files are unchanged; vmagent's unit renders but the role does not run)."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.roles.rendering import (
    PAIR_INVENTORY,
    ROLES,
    SAMPLE_INVENTORY,
    pair_tls_vars,
    render,
    run_playbook,
)
from tests.unit.roles.test_role_firewall import ADMIN, SITE, _play, _rule

PAIR = PAIR_INVENTORY


def argv(unit: str) -> list[str]:
    lines = unit.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("ExecStart="))
    text = ""
    for line in lines[i:]:
        text += line.removeprefix("ExecStart=").rstrip("\\") + " "
        if not line.endswith("\\"):
            break
    return shlex.split(text)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return render(tmp_path_factory.mktemp("pair"), inventory=PAIR)


@pytest.fixture(scope="module")
def pair_tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("pair-tls")
    return render(tmp, inventory=PAIR, extra_vars=pair_tls_vars(tmp / "home"))


def test_victoriametrics_deduplicates_at_the_scrape_interval_and_does_not_scrape(
    pair: dict[str, str],
) -> None:
    vm = argv(pair["victoriametrics.service"])
    assert "-dedup.minScrapeInterval=30s" in vm
    assert not [a for a in vm if a.startswith("-promscrape")]


def test_vmagent_writes_to_both_replicas_with_a_queue_each_and_no_staleness_markers(
    pair: dict[str, str],
) -> None:
    agent = argv(pair["vmagent.service"])
    assert agent[0] == "/opt/vigil/vmagent/current/bin/vmagent"
    assert [a for a in agent if a.startswith("-remoteWrite.url=")] == [
        "-remoteWrite.url=http://198.18.0.10:8428/api/v1/write",
        "-remoteWrite.url=http://198.18.0.12:8428/api/v1/write",
    ]
    assert "-promscrape.config=/etc/vigil/victoriametrics/scrape.yml" in agent
    assert "-promscrape.noStaleMarkers" in agent  # VictoriaMetrics #10196
    assert "-remoteWrite.tmpDataPath=/var/lib/vigil/vmagent" in agent
    assert "-httpListenAddr=127.0.0.1:8429" in agent
    # 24 h at 20000 samples/s at 16 bytes a sample, rounded up to 500 MiB chunks
    size = int(next(a for a in agent if a.startswith("-remoteWrite.maxDiskUsagePerURL=")).split("=")[1])
    assert size >= 24 * 3600 * 20000 * 16 and size % (500 * 1024 * 1024) == 0
    assert size - 24 * 3600 * 20000 * 16 < 500 * 1024 * 1024


def test_vmagent_reads_the_scrape_configuration_of_victoriametrics_as_a_member_of_its_group(
    pair: dict[str, str],
) -> None:
    unit = pair["vmagent.service"]
    assert "ReadWritePaths=/var/lib/vigil/vmagent" in unit.splitlines()
    role = ROLES / "vmagent"
    task = next(
        t for t in yaml.safe_load((role / "tasks" / "configure.yml").read_text()) if "unit" in t["name"]
    )
    assert "[_vmagent_scrape_group]" in task["vars"]["_common_unit_supplementary_groups"]
    consts = yaml.safe_load((role / "vars" / "main.yml").read_text())
    assert "victoriametrics_system_user" in consts["_vmagent_scrape_group"]
    assert "victoriametrics_config_dir" in consts["_vmagent_scrape_file"]


def test_vmalert_writes_through_the_local_vmagent_and_restores_from_the_local_store(
    pair: dict[str, str],
) -> None:
    vmalert = argv(pair["vmalert.service"])
    assert "-remoteWrite.url=http://127.0.0.1:8429" in vmalert
    assert "-remoteRead.url=http://127.0.0.1:8428" in vmalert
    assert "-datasource.url=http://127.0.0.1:8428" in vmalert


def test_each_vmagent_scrapes_its_own_metrics_on_loopback_and_the_rest_as_before(
    pair: dict[str, str],
) -> None:
    scrape = yaml.safe_load(pair["scrape.yml"])
    jobs = {j["job_name"]: j for j in scrape["scrape_configs"]}
    assert [sc["targets"] for sc in jobs["vmagent"]["static_configs"]] == [["127.0.0.1:8429"]]
    assert [sc["labels"]["instance"] for sc in jobs["vmagent"]["static_configs"]] == ["mon01"]
    assert {
        sc["labels"]["instance"]: sc["targets"][0] for sc in jobs["victoriametrics"]["static_configs"]
    } == {
        "mon01": "198.18.0.10:8428",
        "mon02": "198.18.0.12:8428",
    }


def test_with_tls_the_pair_gives_each_link_the_site_ca_and_the_api_login(pair_tls: dict[str, str]) -> None:
    agent = argv(pair_tls["vmagent.service"])
    assert [a for a in agent if a.startswith("-remoteWrite.url=")] == [
        "-remoteWrite.url=https://198.18.0.10:8428/api/v1/write",
        "-remoteWrite.url=https://198.18.0.12:8428/api/v1/write",
    ]
    assert agent.count("-remoteWrite.tlsCAFile=/etc/vigil/tls/ca.crt") == 2
    assert agent.count("-remoteWrite.basicAuth.passwordFile=/etc/vigil/vmagent/api.password") == 2
    assert any(a.startswith("-httpAuth.username=") for a in agent)
    vmalert = argv(pair_tls["vmalert.service"])
    assert "-remoteWrite.url=http://127.0.0.1:8429" in vmalert
    assert "-remoteWrite.basicAuth.passwordFile=/etc/vigil/vmalert/api.password" in vmalert
    assert not any(a.startswith("-remoteWrite.tlsCAFile") for a in vmalert)
    scrape = yaml.safe_load(pair_tls["scrape.yml"])
    job = next(j for j in scrape["scrape_configs"] if j["job_name"] == "vmagent")
    assert job["basic_auth"]["password_file"] == "/etc/vigil/victoriametrics/api.password"
    assert "scheme" not in job and "params" not in job  # http on loopback, no metrics key in a URL


def test_the_firewall_lets_each_monitoring_host_reach_the_others_store_and_opens_nothing_for_vmagent(
    tmp_path: Path,
) -> None:
    site: dict[str, Any] = copy.deepcopy(SITE)
    site["all"]["children"]["monitoring"]["hosts"]["mon02"] = {"ansible_host": "198.18.0.12"}
    res = _play(tmp_path, site, {"firewall_admin_networks": [ADMIN]})
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    for host, other in (("mon01", "198.18.0.12"), ("mon02", "198.18.0.10")):
        text = (tmp_path / "out" / f"{host}.nft").read_text()
        ports, sources = _rule(text, "apis")
        assert 8428 in ports and other in sources
        assert "8429" not in text


def test_vmagent_refuses_a_single_monitoring_host_when_forced_on(tmp_path: Path) -> None:
    from tests.unit.roles.rendering import contract_vars

    play = [
        {
            "name": "vmagent preflight",
            "hosts": "mon01",
            "gather_facts": False,
            "vars_files": [
                str(ROLES / "vmagent" / "defaults" / "main.yml"),
                str(ROLES / "vmagent" / "vars" / "main.yml"),
            ],
            "tasks": [{"ansible.builtin.import_tasks": str(ROLES / "vmagent" / "tasks" / "preflight.yml")}],
        }
    ]
    res = run_playbook(
        tmp_path, play, SAMPLE_INVENTORY, {**contract_vars(tmp_path / "home"), "vmagent_enabled": True}
    )
    assert res.returncode != 0
    assert (
        "vmagent runs in the monitoring pair only, with two hosts or more in group monitoring (1 now)"
        in res.stdout
    )


def test_the_password_file_vmagent_gives_each_replica_holds_the_password_and_one_newline(
    tmp_path: Path,
) -> None:
    """The file behind -remoteWrite.basicAuth.passwordFile, written by the role's own task text: in
    the pair's lab a folded YAML string had ended it with a backslash and an n, which vmagent sent
    as part of the password (401 from both replicas)."""
    task = yaml.safe_load((ROLES / "vmagent" / "tasks" / "configure.yml").read_text())[0]
    (item,) = [i for i in task["loop"] if "api_password_file" in i["dest"]]
    secret = tmp_path / "api.password"
    secret.write_text("c2VjcmV0IHRoYXQgaXMgbm90IHJlYWwgYXQgYWxs\n")
    out = tmp_path / "written"
    play = [
        {
            "hosts": "mon01",
            "gather_facts": False,
            "tasks": [
                {"ansible.builtin.copy": {"content": item["content"], "dest": str(out), "mode": "0600"}}
            ],
        }
    ]
    for tls, want in ((True, b"c2VjcmV0IHRoYXQgaXMgbm90IHJlYWwgYXQgYWxs\n"), (False, b"")):
        res = run_playbook(
            tmp_path,
            play,
            SAMPLE_INVENTORY,
            {"vigil_api_password_file": str(secret), "_vmagent_destinations": [{"tls": tls}]},
        )
        assert res.returncode == 0, res.stdout[-3000:]
        assert out.read_bytes() == want


REFUSED_PAGE = b"""vmagent_remotewrite_requests_total{url="1:secret-url", status_code="2XX"} 12
vmagent_remotewrite_requests_total{url="2:secret-url", status_code="2XX"} 0
vmagent_remotewrite_requests_total{url="2:secret-url", status_code="401"} 7
vmagent_remotewrite_retries_count_total{url="2:secret-url"} 3
"""


@pytest.mark.parametrize(
    ("page", "says"),
    [
        (REFUSED_PAGE, "https://198.18.0.12:8428/api/v1/write answered HTTP 401"),
        (REFUSED_PAGE.replace(b'status_code="401"} 7', b'status_code="401"} 0'), None),
    ],
)
def test_the_deploy_fails_naming_the_replica_that_refuses_vmagents_writes(
    tmp_path: Path, page: bytes, says: str | None
) -> None:
    """What the pair's lab met (401 from both replicas) fails the deploy, naming the replica; the
    metrics page is vmagent's own (both channels print these lines)."""
    from tests.helpers.tls_site import serve

    play = [
        {
            "hosts": "mon01",
            "gather_facts": False,
            "tasks": [{"ansible.builtin.include_role": {"name": "vmagent", "tasks_from": "check_writes"}}],
        }
    ]
    dests = [
        {"host": "mon01", "tls": True, "url": "https://198.18.0.10:8428/api/v1/write"},
        {"host": "mon02", "tls": True, "url": "https://198.18.0.12:8428/api/v1/write"},
    ]
    with serve(lambda request: (200, page)) as agent:
        res = run_playbook(
            tmp_path,
            play,
            SAMPLE_INVENTORY,
            {"_vmagent_url": agent.url, "_vmagent_login": False, "_vmagent_destinations": dests},
        )
    out = res.stdout + res.stderr
    if says is None:
        assert res.returncode == 0, out[-3000:]
    else:
        assert res.returncode != 0 and says in out, out[-3000:]
        assert "198.18.0.10:8428/api/v1/write answered" not in out
