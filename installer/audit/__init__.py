"""The appliance's tamper-evident audit log.

Every vigil command appends one record to ``$VIGIL_HOME/audit/log.jsonl`` and a signed
checkpoint to ``$VIGIL_HOME/audit/checkpoints.jsonl`` before it exits.

Why a SHA-256 hash chain and not an RFC 6962 Merkle tree: each record carries the hash of
the one before, so a verifier walks the file once, in constant memory, with nothing but
``hashlib``; an appliance log holds thousands to a few million records, which a linear walk
checks in seconds. A Merkle tree (RFC 6962, as in Certificate Transparency) would add
O(log n) inclusion proofs (show one record belongs to a signed head without the rest of
the log) and consistency proofs (show a later head extends an earlier one without
re-reading the log). Neither is needed when the auditor receives the whole log, which is
how ``vigil audit export`` hands it over; the chain keeps the format simple enough to check
with a short script.

Checkpoints are signed with the appliance's own Ed25519 audit key (see
:mod:`vigil.installer.audit.keys`), so rewriting the chain from some record onward — which a
chain alone cannot reveal — no longer matches a signed head. That key sits beside the log, so
root on the host can still re-sign a rewritten log, or cut log and checkpoints back together:
every checkpoint is therefore also sent off the host as it is made (see
:mod:`vigil.installer.audit.witness`), and the key's id is pinned at first use in
``$VIGIL_HOME/trust/audit-key-id``.
"""

from __future__ import annotations

from vigil.installer.audit._canonical import GENESIS, canonical
from vigil.installer.audit._files import PIN_NAME, AuditPaths
from vigil.installer.audit.command import record_command
from vigil.installer.audit.errors import AuditError
from vigil.installer.audit.export import export
from vigil.installer.audit.keys import key_id, load_public_key, read_pin
from vigil.installer.audit.log import DEFAULT_CHECKPOINT_EVERY, AuditLog
from vigil.installer.audit.verify import Summary, verify, verify_summary
from vigil.installer.audit.witness import SyslogWitness, Witnessed, first_witness_line, witness_line

__all__ = [
    "DEFAULT_CHECKPOINT_EVERY",
    "GENESIS",
    "PIN_NAME",
    "AuditError",
    "AuditLog",
    "AuditPaths",
    "Summary",
    "SyslogWitness",
    "Witnessed",
    "canonical",
    "export",
    "first_witness_line",
    "key_id",
    "load_public_key",
    "read_pin",
    "record_command",
    "verify",
    "verify_summary",
    "witness_line",
]
