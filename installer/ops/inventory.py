"""``inventory check``: what ``deploy`` checks of an inventory before it contacts a host, on its own.

Step 1 of a deploy (groups vigil knows, every host placed, required variables, the limit), then the
roles' argument specs of the imported bundle (or ``--ansible-dir``) against each host's variables.
Nothing is contacted and nothing changes; the check leaves an audit record, as every action does.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vigil.basics.atomic import write_file_atomic
from vigil.bundle.store import BundleStore
from vigil.installer.deploy.argspec import SpecCheck, check_argument_specs, refuse_bad_variables
from vigil.installer.deploy.artifacts import DeployError, open_stored
from vigil.installer.deploy.inventory import (
    Inventory,
    SharedVars,
    load_inventory,
    parse_shared_vars,
    shared_vars,
)
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
            out.append(self.summary())
            return out
        out.append(self.summary())
        out += [f"  {line}" for line in self.specs.lines()]
        out += [f"  {line}" for line in self.specs.deferred_lines()]
        return out

    def summary(self) -> str:
        """The argument specs' verdict in one line."""
        if self.specs is None:
            return "roles' argument specs: not checked (no bundle imported; import one or use --ansible-dir)"
        source = f"bundle {self.bundle_version}" if self.bundle_version is not None else "--ansible-dir"
        deferred = len(self.specs.deferred)
        return (
            f"roles' argument specs ({source}): {self.specs.checked} host and role pairs checked, "
            f"{len(self.specs.findings)} refused"
            + (
                f", {deferred} values deferred: evaluated at deploy time (nothing was run)"
                if deferred
                else ""
            )
        )


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


def read_shared_vars(inventory: Path) -> SharedVars:
    """The inventory's ``group_vars/all.yml`` as an editor shows it, with the digest a save checks."""
    return shared_vars(inventory)


def edit_shared_vars(
    inv: Invocation,
    *,
    inventory: Path,
    text: str,
    expected_sha256: str | None = None,
    trust: Path | None = None,
    bundle_version: int | None = None,
    ansible_dir: Path | None = None,
) -> InventoryCheck:
    """``inventory edit``: replace the variables every host shares, only if the inventory still passes
    the whole check with them (on a private copy first); written staged, then renamed.

    ``expected_sha256``: the digest of the file as it was read for editing; a file changed since (by
    someone else) is refused rather than overwritten."""
    inv.object = str(inventory)
    current = shared_vars(inventory)
    inv.object = str(current.path)
    inv.details.update(inventory=str(inventory), sha256_before=current.sha256)
    if expected_sha256 is not None and expected_sha256 != current.sha256:
        raise DeployError(
            str(current.path),
            f"changed on disk since it was read (sha256 {current.sha256[:12]}, not {expected_sha256[:12]}); "
            "read it again; nothing was written",
        )
    parse_shared_vars(text, str(current.path))
    staging = Path(tempfile.mkdtemp(prefix=".vigil-inventory-"))
    try:
        copy = staging / inventory.name
        shutil.copytree(inventory, copy, symlinks=True)
        (copy / current.path.relative_to(inventory)).parent.mkdir(parents=True, exist_ok=True)
        (copy / current.path.relative_to(inventory)).write_text(text)
        try:
            trial = check_inventory(
                Invocation(home=inv.home),
                inventory=copy,
                trust=trust,
                bundle_version=bundle_version,
                ansible_dir=ansible_dir,
            )
            inventory_failure(trial, copy)
        except DeployError as exc:
            why = exc.reason.replace(str(copy), str(inventory)).removesuffix("; nothing was changed")
            raise DeployError(
                str(current.path), f"with these variables: {why}; nothing was written"
            ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if shared_vars(inventory).sha256 != current.sha256:  # changed while the copy was checked
        raise DeployError(
            str(current.path), "changed on disk while the edit was checked; nothing was written"
        )
    mode = current.path.stat().st_mode & 0o777 if current.path.exists() else 0o644
    current.path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomic(current.path, text.encode(), mode=mode)
    after = shared_vars(inventory)
    inv.details.update(sha256_after=after.sha256)
    result = check_inventory(
        inv, inventory=inventory, trust=trust, bundle_version=bundle_version, ansible_dir=ansible_dir
    )
    inv.object = str(current.path)
    return result
