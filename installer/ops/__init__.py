"""The operations layer: one function per user action, below every front end.

The CLI (:mod:`vigil.installer.cli`) and the TUI are thin front ends over these functions: they
parse and render, nothing else. Each operation takes an :class:`Invocation` — who asked, the state
root, where progress goes — fills in what the audit record says about it, and raises a
:class:`~vigil.basics.errors.VigilError` naming the object and the reason when it cannot be done.
:func:`audited` wraps an action so that it leaves exactly one audit record whatever happens.

Progress reaches the front end as events: :class:`Step` lines and :class:`Bytes` counts through
``Invocation.on_event`` (called on the working thread), and a deploy's ansible-runner events on a
queue the front end drains (:func:`start_deploy`).
"""

from __future__ import annotations

from vigil.installer.access import SiteAccess, curl_options, failure_reason, login_hint, site_access
from vigil.installer.ops._invocation import Bytes, Event, EventSink, Invocation, Step, audited, record
from vigil.installer.ops.audit import audit_checkpoint, audit_export, audit_records, audit_verify
from vigil.installer.ops.backup import backup_status, backup_status_failure
from vigil.installer.ops.bundle import (
    Built,
    Split,
    build_bundle,
    import_bundle,
    inspect_bundle,
    join_bundle,
    lock_channel,
    split_bundle,
    verified_message,
    verify_bundle,
)
from vigil.installer.ops.deploy import deploy_failure, finish_deploy, plan_deploy, start_deploy
from vigil.installer.ops.explain import explain_gpu_lines, explain_gpu_op, explain_job_op, explain_lines
from vigil.installer.ops.home import site_summary
from vigil.installer.ops.inventory import (
    InventoryCheck,
    check_inventory,
    edit_shared_vars,
    inventory_failure,
    read_shared_vars,
)
from vigil.installer.ops.keys import (
    NewKey,
    generate_key,
    init_trust,
    install_trust,
    installed_trust_path,
    load_keys,
    load_trust,
    resolve_trust,
    show_key,
    show_trust,
    sign_trust,
)
from vigil.installer.ops.lab import lab_down, lab_fault, lab_job, lab_status, lab_up
from vigil.installer.ops.pki import (
    PKI_CA_DAYS,
    PKI_LEAF_DAYS,
    PKI_RENEW_DAYS,
    PKI_USAGES,
    pki_init,
    pki_issue,
    pki_status,
    pki_status_failure,
)
from vigil.installer.ops.plan import PlanInputs, plan_lines, plan_op
from vigil.installer.ops.replicas import monitoring_urls, read_replicas, replica_health, site_metrics_key
from vigil.installer.ops.report import (
    Generated,
    last_deployed_inventory,
    report_close,
    report_energy,
    report_export,
    report_list,
    report_show,
    report_usage,
    report_verify,
    resolve_vm,
)
from vigil.installer.ops.upgrade import AdminState, HostStatus, Outcome, admin_status, upgrade
from vigil.installer.ops.upgrade import outcome_message as upgrade_outcome_message
from vigil.installer.ops.upgrade import plan_lines as upgrade_plan_lines
from vigil.installer.ops.upgrade import status as site_status
from vigil.installer.reports.backups import HostBackups
from vigil.installer.stack import (
    Answer,
    Failure,
    ReadFailed,
    Replicas,
    StackError,
    TooLarge,
    alert_who,
    split_urls,
)
from vigil.installer.stack_health import ReplicaHealth

__all__ = [
    "explain_gpu_lines",
    "explain_gpu_op",
    "site_summary",
    "last_deployed_inventory",
    "explain_job_op",
    "explain_lines",
    "alert_who",
    "PKI_CA_DAYS",
    "PKI_LEAF_DAYS",
    "PKI_RENEW_DAYS",
    "PKI_USAGES",
    "Built",
    "Bytes",
    "Event",
    "EventSink",
    "Generated",
    "HostBackups",
    "HostStatus",
    "InventoryCheck",
    "Invocation",
    "NewKey",
    "Outcome",
    "PlanInputs",
    "SiteAccess",
    "Answer",
    "Failure",
    "ReadFailed",
    "Replicas",
    "ReplicaHealth",
    "monitoring_urls",
    "replica_health",
    "read_replicas",
    "site_metrics_key",
    "StackError",
    "TooLarge",
    "split_urls",
    "Split",
    "Step",
    "audit_checkpoint",
    "audit_export",
    "audit_records",
    "audit_verify",
    "audited",
    "AdminState",
    "admin_status",
    "backup_status",
    "backup_status_failure",
    "build_bundle",
    "check_inventory",
    "curl_options",
    "deploy_failure",
    "edit_shared_vars",
    "failure_reason",
    "finish_deploy",
    "generate_key",
    "import_bundle",
    "init_trust",
    "inspect_bundle",
    "install_trust",
    "installed_trust_path",
    "inventory_failure",
    "join_bundle",
    "lab_down",
    "lab_fault",
    "lab_job",
    "lab_status",
    "lab_up",
    "load_keys",
    "load_trust",
    "lock_channel",
    "login_hint",
    "pki_init",
    "pki_issue",
    "pki_status",
    "pki_status_failure",
    "plan_deploy",
    "plan_lines",
    "plan_op",
    "read_shared_vars",
    "record",
    "report_close",
    "report_energy",
    "report_export",
    "report_list",
    "report_show",
    "report_usage",
    "report_verify",
    "resolve_vm",
    "resolve_trust",
    "show_key",
    "site_status",
    "show_trust",
    "sign_trust",
    "site_access",
    "split_bundle",
    "start_deploy",
    "upgrade",
    "upgrade_outcome_message",
    "upgrade_plan_lines",
    "verified_message",
    "verify_bundle",
]
