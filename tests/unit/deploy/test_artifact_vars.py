"""The extra vars every run gets from the bundle (deploy/artifacts.py): words of the signed manifest,
which Ansible would render as templates on the admin host, so each must have a plain shape."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.factories import Member, craft_bundle, default_members, make_key, make_trust
from vigil.bundle.store import BundleStore
from vigil.installer.deploy.artifacts import UnsafeValue, artifact_vars, open_stored

#: run on the admin host if Ansible ever rendered it
TEMPLATE = "{{ lookup('ansible.builtin.pipe', 'id') }}"


def stored(tmp_path: Path, edit: Callable[[dict[str, Any]], None] | None = None, members: Any = None) -> Any:
    from vigil.installer.cli import main

    key = make_key(tmp_path / "keys", "release")
    trust = tmp_path / "trust.json"
    root = make_trust(trust, [key])
    home = tmp_path / "home"
    bundle = craft_bundle(tmp_path / "out", [key], version=1, edit=edit, members=members).path
    assert main(["--home", str(home), "bundle", "import", str(bundle), "--trust", str(trust)]) == 0
    return open_stored(BundleStore(home), root, 1)


def test_a_plain_bundle_gives_its_artifacts(tmp_path: Path) -> None:
    got = artifact_vars(stored(tmp_path))
    assert got["vigil_bundle_channel"] == "test"
    assert got["vigil_artifacts"]["bin/demo"]["component"] == "demo"
    assert got["vigil_artifacts"]["bin/demo"]["version"] == "1.0"


def _file(field: str, value: str) -> Callable[[dict[str, Any]], None]:
    def edit(m: dict[str, Any]) -> None:
        m["files"][0][field] = value

    return edit


def _channel(m: dict[str, Any]) -> None:
    m["channel"] = TEMPLATE


@pytest.mark.parametrize(
    ("edit", "members", "what"),
    [
        (_file("version", TEMPLATE), None, "version of bin/demo"),
        (_file("version", "1.0 x"), None, "version of bin/demo"),
        (_file("component", TEMPLATE), None, "component of bin/demo"),
        (_channel, None, "channel"),
        (None, [Member("components/demo/bin/{{ 7 * 7 }}", b"x")] + default_members()[1:], "path"),
    ],
    ids=["version", "version-space", "component", "channel", "path"],
)
def test_a_signed_word_that_is_not_plain_is_refused_before_it_becomes_an_extra_var(
    tmp_path: Path, edit: Any, members: Any, what: str
) -> None:
    bundle = stored(tmp_path, edit, members)
    with pytest.raises(UnsafeValue) as err:
        artifact_vars(bundle)
    assert err.value.obj == "bundle 1"
    assert err.value.reason.startswith(f"{what} "), err.value.reason
    assert err.value.reason.endswith(
        "is not a plain name (letters, digits, . _ + - : ~; no brace, quote or space): "
        "Ansible would read it as a template; refused"
    )
    assert err.value.outcome == "refused"
    shown = err.value.reason.removeprefix(f"{what} ").split(" is not a plain name")[0]
    assert json.loads(shown) in (TEMPLATE, "1.0 x", "components/demo/bin/{{ 7 * 7 }}")
