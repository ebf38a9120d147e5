"""``inventory check``: what ``deploy`` checks of an inventory before it contacts a host, on its own.

Step 1 of a deploy (groups vigil knows, every host placed, required variables, the limit), then the
roles' argument specs of the imported bundle (or ``--ansible-dir``) against each host's variables.
Nothing is contacted and nothing changes; the check leaves an audit record, as every action does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vigil.bundle.store import BundleStore
from vigil.installer.deploy.argspec import SpecCheck, check_argument_specs, refuse_bad_variables
from vigil.installer.deploy.artifacts import open_stored
from vigil.installer.deploy.inventory import Inventory, load_inventory
from vigil.installer.ops._invocation import Invocation
from vigil.installer.ops.keys import trust_for_bundle


@dataclass(frozen=True)
class InventoryCheck:
    inventory: Inventory
    #: the bundle whose roles' argument specs were checked (None: --ansible-dir, or none imported)
    bundle_version: int | None
    #: None when there was no Ansible content to check against (no bundle imported)
    specs: SpecCheck | None

    def lines(self) -> list[str]:
        """What an operator reads: the hosts by group, then the argument specs' verdict."""
        out = [
            f"{group}: {', '.join(hosts) or '-'}" for group, hosts in sorted(self.inventory.groups.items())
        ]
        if self.specs is None:
            out.append(
                "roles' argument specs: not checked (no bundle imported; import one or use --ansible-dir)"
            )
            return out
        source = f"bundle {self.bundle_version}" if self.bundle_version is not None else "--ansible-dir"
        out.append(
            f"roles' argument specs ({source}): {self.specs.checked} host and role pairs checked, "
            f"{len(self.specs.findings)} refused"
            + (
                f", {len(self.specs.deferred)} values left to the play (they read facts)"
                if self.specs.deferred
                else ""
            )
        )
        out += [f"  {line}" for line in self.specs.lines()]
        return out


def check_inventory(
    inv: Invocation,
    *,
    inventory: Path,
    limit: str | None = None,
    trust: Path | None = None,
    bundle_version: int | None = None,
    ansible_dir: Path | None = None,
) -> InventoryCheck:
    """The check; raises :class:`~vigil.installer.deploy.DeployError` on the first problem of step 1,
    and, after the front end has had the result (:func:`inventory_failure`), on refused variables."""
    inv.object = str(inventory)
    checked = load_inventory(inventory, limit=limit)
    inv.details.update(hosts=len(checked.hosts), limit=limit)
    store = BundleStore(inv.home)
    version: int | None = None
    if ansible_dir is not None:
        content: Path | None = ansible_dir
        inv.details.update(ansible_dir=str(ansible_dir))
    elif store.versions():
        root = trust_for_bundle(inv.home, trust, inv.details).root
        stored = open_stored(store, root, bundle_version)
        content, version = stored.ansible_dir, stored.version
        inv.details.update(bundle_version=version, manifest_sha256=stored.manifest_sha256)
    else:
        content = None
    specs = check_argument_specs(content, checked.path, checked.selected) if content is not None else None
    if specs is not None:
        inv.details.update(checked=specs.checked, refused=len(specs.findings), deferred=len(specs.deferred))
    return InventoryCheck(checked, version, specs)


def inventory_failure(check: InventoryCheck, inventory: Path) -> None:
    """Raise the one-line refusal of a check with refused variables (after they were shown)."""
    if check.specs is not None:
        refuse_bad_variables(check.specs, inventory, listed=True)
