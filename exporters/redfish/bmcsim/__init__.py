"""A Redfish BMC simulator for the lab and the tests (``python3 -m vigil.exporters.redfish.bmcsim``)."""

from __future__ import annotations

from vigil.exporters.redfish.bmcsim.sim import MOCKUPS, Model, SimConfig, load_mockup, make_server

__all__ = ["MOCKUPS", "Model", "SimConfig", "load_mockup", "make_server"]
