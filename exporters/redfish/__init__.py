"""Redfish exporter: server and PDU power, temperatures, fans and energy from BMCs over DMTF Redfish.

- :mod:`.config` — the targets file (JSON or a strict YAML subset) and the credentials files;
- :mod:`.client` — a guarded HTTP client (same-origin links only, size and depth caps, deadlines);
- :mod:`.walk` — the resource tree, walked once and cached, and the readings fetched per scrape;
- :mod:`.readings` — names, units and the winner rule;
- :mod:`.collector` — all targets at once on a bounded worker pool;
- :mod:`.bmcsim` — a BMC simulator for the lab and the tests.
"""

from __future__ import annotations

from vigil.exporters.redfish.collector import DEFAULT_PORT, RedfishCollector
from vigil.exporters.redfish.config import ConfigError, Target, load_config, parse_config, read_credentials

__all__ = [
    "DEFAULT_PORT",
    "ConfigError",
    "RedfishCollector",
    "Target",
    "load_config",
    "parse_config",
    "read_credentials",
]
