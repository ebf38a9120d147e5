"""vigil's Grafana dashboards as code: a panel-building library and one module per dashboard.

- :mod:`tools.dashboards._lib`: the panel kinds, targets, variables and the dashboard frame;
- :mod:`~tools.dashboards.overview`, :mod:`~tools.dashboards.node`, :mod:`~tools.dashboards.job`,
  :mod:`~tools.dashboards.account`, :mod:`~tools.dashboards.alerts`: one dashboard each, a
  ``build()`` returning its JSON model and its ``UID``.

``tools/generate_dashboards.py`` writes them to roles/grafana/files/dashboards/ and checks the
committed files against them.

The queries read the recording rules of roles/vmalert/files/rules/ where one exists (cluster:*,
node:*, account:*) and the dcgm-exporter series of roles/dcgm_exporter/files/vigil-counters.csv
otherwise. Every DCGM series of an allocated GPU carries `hpc_job`; a GPU shared by several jobs
has one series per job, hence the `max by (instance, gpu)` before any sum.

Why plain Python and not Grafana's ``grafana-foundation-sdk`` (on the package index): it was
weighed and left out, for four reasons.

1. Its encoder writes schema defaults alongside what a builder sets (``fiscalYearStartMonth``,
   ``transparent``, ``repeatDirection``, ``editable: true``, ``timezone: browser``, ``templating``
   as an empty object), so the dashboards the role ships would change in bytes and in behaviour;
   ours state every option they rely on and nothing else.
2. It is published as experimental and "not meant to be used in production environments", and its
   releases are numbered by a build timestamp in the version epoch with the Grafana version after
   it (``1769699630!11.2.0``): an unpinned install resolves to whichever build is newest, which
   today targets Grafana 10.1, not the 11.2 vigil ships. Pinning it means tracking one build per
   Grafana upgrade, by hand.
3. It is a generated tree of about 5 MB of types for every panel plugin and data source, to emit five
   dashboards that need six panel kinds and one data source.
4. The dashboards are generated in a checkout and committed as JSON: the appliance ships the JSON,
   so nothing at the air-gapped site needs either approach. What matters is that the generator
   runs on a bare checkout with the standard library, deterministically, and that a reviewer can
   read its diff; a small library of our own does that with no dependency to pin.

The tests in tests/unit/dashboards check every panel's shape, data source and queries, so a typo
that a typed builder would catch at build time is caught there.
"""

from __future__ import annotations

import json

from tools.dashboards import account, alerts, job, node, overview
from tools.dashboards._lib import DATASOURCE, Dashboard

__all__ = ["DATASOURCE", "MODULES", "Dashboard", "build_all", "render"]

# The order the dashboards are written in (and listed by the generator).
MODULES = (overview, node, job, account, alerts)


def build_all() -> dict[str, Dashboard]:
    """Every dashboard, freshly built, by uid."""
    return {d["uid"]: d for d in (module.build() for module in MODULES)}


def render(d: Dashboard) -> str:
    """The file text: sorted keys, two-space indent, UTF-8 as is, a final newline."""
    return json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
