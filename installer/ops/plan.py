"""``plan``: the topology, capacity and deploy time for a cluster's size (docs/plan.md)."""

from __future__ import annotations

from typing import Any

from vigil.installer.ops._invocation import Invocation
from vigil.installer.plan import Inputs, plan, plan_lines


def plan_op(inv: Invocation, inputs: Inputs) -> dict[str, Any]:
    """The plan for INPUTS; reads nothing, changes nothing (the audit record says what was asked)."""
    inv.object = f"{inputs.gpu_nodes} GPU nodes x {inputs.gpus_per_node} GPUs"
    return plan(inputs)


PlanInputs = Inputs

__all__ = ["PlanInputs", "plan_lines", "plan_op"]
