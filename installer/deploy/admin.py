"""The admin host's own vigil, installed from the same signed bundle as the roles it runs.

Hosts get ``/opt/vigil/<component>/<version>/`` and a ``current`` link; the admin host gets the same
for vigil itself, under its install root (default ``/opt/vigil/admin``, ``--admin-root`` or
``$VIGIL_ADMIN_ROOT``)::

    /opt/vigil/admin/
      0.1.0-bundle7/          a virtual environment: bin/vigil, vigil-install.json
      0.1.2-bundle8/
      current -> 0.1.2-bundle8
      .lock                   one install at a time (flock, dropped by the kernel when the holder dies)

A version directory is named by vigil's version and the bundle's, so two bundles that carry the
same vigil version with different wheels never share one. The steps, in order:

1. the name: the version the signed manifest gives vigil's wheel must be a plain version (no
   slash, no ``..``) and the one in the wheel's file name;
2. the root: made if missing, a directory of this user that nobody else may write, locked;
3. what is there: ``current`` must be a link to a version directory of the root, and the version
   directory, if present, a directory (never a link) holding this very bundle's install record,
   which is then used as it is;
4. the wheels: copied from the store into a private staging directory of the root (0700) while
   they are hashed against the manifest, so what pip reads is what was checked;
5. the install: a new virtual environment in the staging directory (without pip: pip runs from
   the interpreter's own pip wheel, the one ``python3 -m venv`` would have installed), ``pip
   install --no-index --require-hashes`` of exactly the bundle's wheels (pip hashes each wheel
   again as it installs it, and its resolver refuses a set that misses a dependency), and
   vigil's version read back; no index, no cache, no
   configuration file, temporary files inside the staging directory: nothing is written outside
   the root;
6. the rename: the scripts' interpreter lines are rewritten to the final path, the install record
   written, and the environment renamed to its version directory: a half-made environment never
   has a version directory's name, let alone ``current``;
7. the switch (only after the site's upgrade succeeded): a new link made beside ``current`` and
   renamed over it, which is atomic;
8. the versions other than ``current``, the one before it and the one running are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil.basics.atomic import fsync_dir, write_file_atomic
from vigil.basics.bounded import load_json_file
from vigil.bundle.errors import TamperedFile
from vigil.installer.deploy.artifacts import CHUNK, DeployError, StoredBundle, UnsafeValue
from vigil.installer.deploy.site import SiteLock

#: where the admin host's vigil versions live unless --admin-root or $VIGIL_ADMIN_ROOT says otherwise
DEFAULT_ROOT = Path("/opt/vigil/admin")
ROOT_ENV = "VIGIL_ADMIN_ROOT"
#: the bundle's wheels for the admin host (docs/bundle-format.md)
WHEEL_DIRS = ("components/vigil/wheels/", "components/vigil-deps/wheels/")
VIGIL_WHEELS = WHEEL_DIRS[0]
#: what each install holds about itself, at the top of its version directory
RECORD = "vigil-install.json"
RECORD_MAX_BYTES = 1 << 20
CURRENT = "current"
#: a version as it may become a directory's name: no slash, no "..", not hidden
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")
_DIRNAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}-bundle[0-9]{1,20}")
#: a wheel's file name: name-version(-build)?-python-abi-platform.whl (PEP 427), in the characters
#: those parts may hold: the name and version go into pip's requirements file, where a space would
#: start an option
_WHEEL = re.compile(
    r"([A-Za-z0-9_.]+)-([A-Za-z0-9_.+!]+)(-[0-9][A-Za-z0-9_.]*)?-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+-[A-Za-z0-9_.]+\.whl"
)
#: how long pip and the checks may take before the install is given up (seconds)
PIP_TIMEOUT = 900

Say = Callable[[str], None]


class AdminInstallError(DeployError):
    """The admin host's vigil could not be installed or switched; ``current`` is as it was."""


class AdminRefused(UnsafeValue):
    """Something in the admin install root or the bundle that vigil did not make or cannot trust."""


def admin_root(given: Path | None = None) -> Path:
    """The install root: the option, else $VIGIL_ADMIN_ROOT, else /opt/vigil/admin."""
    if given is not None:
        return Path(given)
    env = os.environ.get(ROOT_ENV)
    return Path(env) if env else DEFAULT_ROOT


@dataclass(frozen=True)
class Wheel:
    path: str  # in the bundle, e.g. components/vigil-deps/wheels/PyYAML-6.0.2-...whl
    filename: str
    project: str  # normalized (PEP 503)
    version: str
    size: int
    sha256: str


@dataclass(frozen=True)
class AdminPlan:
    """What the admin host gets from one bundle: vigil's version and the exact wheels."""

    bundle_version: int
    manifest_sha256: str
    channel: str
    vigil_version: str
    wheels: tuple[Wheel, ...]

    @property
    def dirname(self) -> str:
        return f"{self.vigil_version}-bundle{self.bundle_version}"

    def record(self) -> dict[str, Any]:
        return {
            "vigil_version": self.vigil_version,
            "bundle_version": self.bundle_version,
            "bundle_channel": self.channel,
            "manifest_sha256": self.manifest_sha256,
            "wheels": {w.filename: w.sha256 for w in self.wheels},
        }


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def admin_plan(bundle: StoredBundle) -> AdminPlan:
    """Step 1: vigil's version and wheels from the (verified) bundle's manifest; refuses a bundle
    without vigil's wheel, or whose version could name a path."""
    wheels: list[Wheel] = []
    vigil: list[tuple[str, str]] = []  # (manifest version, file name version)
    for entry in bundle.manifest.files:
        if not entry.path.startswith(WHEEL_DIRS) or not entry.path.endswith(".whl"):
            continue
        filename = entry.path.rsplit("/", 1)[1]
        m = _WHEEL.fullmatch(filename)
        if m is None or entry.path.count("/") != 3:
            raise AdminRefused(f"bundle {bundle.version}", f"{entry.path}: not a wheel's file name")
        project, version = _normalized(m.group(1)), m.group(2)
        wheels.append(Wheel(entry.path, filename, project, version, entry.size, entry.sha256))
        if entry.path.startswith(VIGIL_WHEELS) and project == "vigil":
            vigil.append((entry.version, version))
    if not vigil:
        raise AdminInstallError(
            f"bundle {bundle.version}",
            f"carries no vigil wheel under {VIGIL_WHEELS}; it cannot install the admin host "
            "(pass --no-admin to upgrade the hosts only)",
        )
    if len(vigil) > 1:
        raise AdminRefused(f"bundle {bundle.version}", f"carries {len(vigil)} vigil wheels; one expected")
    declared, in_name = vigil[0]
    if not _VERSION.fullmatch(declared) or ".." in declared:
        shown = json.dumps(declared)
        raise AdminRefused(
            f"bundle {bundle.version}",
            f"vigil's version {shown[:80]} is not a plain version (letters, digits, . + ! _ -; no "
            "slash, no ..): it would name a directory of the admin install root; refused",
        )
    if declared != in_name:
        raise AdminRefused(
            f"bundle {bundle.version}",
            f"vigil's version {declared} in the manifest is not the wheel's ({in_name}); refused",
        )
    versions: dict[str, set[str]] = {}
    for w in wheels:
        versions.setdefault(w.project, set()).add(w.version)
    for project, got in sorted(versions.items()):
        if len(got) > 1:
            raise AdminRefused(
                f"bundle {bundle.version}",
                f"carries {project} in {len(got)} versions ({', '.join(sorted(got))})",
            )
    return AdminPlan(
        bundle.version,
        bundle.manifest_sha256,
        bundle.manifest.channel,
        declared,
        tuple(sorted(wheels, key=lambda w: w.path)),
    )


@dataclass(frozen=True)
class Installed:
    """One version directory of the root, as its install record describes it."""

    dirname: str
    path: Path
    record: dict[str, Any]

    @property
    def vigil_version(self) -> str:
        return str(self.record.get("vigil_version", "?"))

    @property
    def bundle_version(self) -> int | None:
        v = self.record.get("bundle_version")
        return v if isinstance(v, int) else None


def read_current(root: Path) -> Installed | None:
    """What ``current`` points to (None when there is no ``current`` yet).

    Refuses a ``current`` that is not a link, or points anywhere but a version directory of the
    root (a name of vigil's shape, a real directory, with an install record): vigil never made such
    a link, and nothing is followed out of the root.
    """
    link = root / CURRENT
    try:
        st = os.lstat(link)
    except FileNotFoundError:
        return None
    if not stat.S_ISLNK(st.st_mode):
        raise AdminRefused(str(link), "is not a link (vigil makes `current` a link to a version directory)")
    target = os.readlink(link)
    if not _DIRNAME.fullmatch(target):
        raise AdminRefused(
            str(link),
            f"points to {json.dumps(target)[:100]}, not a version directory of {root}; "
            "vigil did not make it: remove it, then upgrade again",
        )
    return read_installed(root, target)


def read_installed(root: Path, dirname: str) -> Installed:
    """A version directory of the root and its record; refuses a link, a non-directory, or a
    directory without a readable record of this user."""
    path = root / dirname
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise AdminRefused(str(path), "is missing (named by `current`)") from None
    if stat.S_ISLNK(st.st_mode):
        raise AdminRefused(str(path), "is a link, not an install vigil made; remove it, then upgrade again")
    if not stat.S_ISDIR(st.st_mode):
        raise AdminRefused(str(path), "is not a directory; remove it, then upgrade again")
    _owned(path, st)
    rec_path = path / RECORD
    try:
        fd = os.open(rec_path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise AdminRefused(
            str(path), f"holds no install record ({RECORD}: {exc.strerror}); not an install vigil made"
        ) from None
    os.close(fd)
    try:
        rec = load_json_file(rec_path, max_bytes=RECORD_MAX_BYTES, error=AdminRefused)
    except ValueError as exc:
        raise AdminRefused(str(rec_path), f"unreadable: {str(exc).splitlines()[0]}") from None
    if not isinstance(rec, dict):
        raise AdminRefused(str(rec_path), "is not an install record")
    return Installed(dirname, path, rec)


def _owned(path: Path, st: os.stat_result) -> None:
    if st.st_uid != os.geteuid():
        raise AdminRefused(str(path), f"belongs to uid {st.st_uid}, not to this user ({os.geteuid()})")
    if st.st_mode & 0o022:
        raise AdminRefused(str(path), f"may be written by others (mode {stat.S_IMODE(st.st_mode):04o})")


@dataclass(frozen=True)
class AdminState:
    """``vigil status``'s line for the admin host."""

    root: Path
    current: Installed | None
    #: why ``current`` could not be read (a planted link, say); empty when it could
    problem: str
    #: the vigil that is answering, and where it runs from
    running_version: str
    running_prefix: str

    def to_json(self) -> dict[str, Any]:
        cur = self.current
        return {
            "root": str(self.root),
            "current": cur.dirname if cur else None,
            "vigil_version": cur.vigil_version if cur else None,
            "bundle_version": cur.bundle_version if cur else None,
            "problem": self.problem,
            "running_version": self.running_version,
            "running_prefix": self.running_prefix,
            "running_current": self.running_current,
        }

    @property
    def running_current(self) -> bool:
        return self.current is not None and Path(self.running_prefix) == self.current.path.resolve()


def admin_state(root: Path, running_version: str) -> AdminState:
    """Read only: what ``current`` is under ``root``, and which vigil answers."""
    try:
        cur, problem = read_current(root), ""
    except DeployError as exc:
        cur, problem = None, str(exc)
    return AdminState(root, cur, problem, running_version, str(Path(sys.prefix).resolve()))


def _clean_env(tmp: Path) -> dict[str, str]:
    """pip's environment: no PIP_* or PYTHON* variable of the caller, no configuration file, no
    index, temporary files in the staging directory."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "VIGIL_")) and k not in ("TMPDIR", "HOME")
    }
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_CACHE_DIR="1",
        PIP_NO_INPUT="1",
        PYTHONNOUSERSITE="1",
        TMPDIR=str(tmp),
        HOME=str(tmp),
        VIGIL_HOME=str(tmp / "home"),  # `vigil --help` as the last check: nothing of the site's
    )
    return env


@dataclass
class AdminStep:
    """The admin host's part of one upgrade or rollback: :meth:`prepare` before the hosts' steps
    (the new version installed beside the old, or found already installed), :meth:`switch` after
    they all passed. ``details`` is the audit record's."""

    root: Path
    say: Say = print
    #: the interpreter the new environments are made from (the one running vigil, by default)
    python: str = field(default_factory=lambda: getattr(sys, "_base_executable", sys.executable))
    details: dict[str, Any] = field(default_factory=dict)
    holder: str = "upgrade"
    _lock: SiteLock | None = None
    _plan: AdminPlan | None = None
    _previous: Installed | None = None

    # --- the lock ----------------------------------------------------------------------------

    def acquire(self) -> None:
        """Step 2: the root made (0755) if missing, checked, and locked for this run (by
        :meth:`prepare`, so that a run refused before it touches nothing of the root)."""
        if self._lock is not None:
            return
        root = self.root
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
        st = os.lstat(root)
        if stat.S_ISLNK(st.st_mode):
            st = os.stat(root)  # a root that is itself a link (another disk) is the operator's choice
        if not stat.S_ISDIR(st.st_mode):
            raise AdminRefused(str(root), "the admin install root is not a directory")
        _owned(root, st)
        self._lock = SiteLock(
            root, self.holder, path=root / ".lock", name=f"admin install root {root}"
        ).acquire()
        for stale in root.glob(".staging-*"):  # a killed run's; nobody else holds the lock
            shutil.rmtree(stale, ignore_errors=True)

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # --- the steps ---------------------------------------------------------------------------

    def preview(self, bundle: StoredBundle) -> str:
        """--check: the line the plan shows; nothing is changed."""
        plan = admin_plan(bundle)
        try:
            cur = read_current(self.root)
        except DeployError as exc:
            return f"admin host: cannot read {self.root / CURRENT}: {exc}"
        old = f"{cur.vigil_version} (bundle {cur.bundle_version})" if cur else "not installed"
        new = f"{plan.vigil_version} (bundle {plan.bundle_version})"
        return f"admin host: vigil {old} -> {new} under {self.root}"

    def prepare(self, bundle: StoredBundle) -> None:
        """Steps 1 and 3 to 6: the target's vigil installed in its version directory (or found
        there already); ``current`` is not touched."""
        self.details.update(root=str(self.root), bundle_version=bundle.version)  # begun: audited
        plan = admin_plan(bundle)
        self.acquire()
        self._plan = plan
        self._previous = read_current(self.root)
        self.details.update(
            root=str(self.root),
            target=plan.dirname,
            vigil_version=plan.vigil_version,
            bundle_version=plan.bundle_version,
            manifest_sha256=plan.manifest_sha256,
            wheels=len(plan.wheels),
            previous=self._previous.dirname if self._previous else None,
            switched=False,
        )
        final = self.root / plan.dirname
        if os.path.lexists(final):
            there = read_installed(self.root, plan.dirname)
            if there.record.get("manifest_sha256") != plan.manifest_sha256 or there.record.get("wheels") != {
                w.filename: w.sha256 for w in plan.wheels
            }:
                raise AdminRefused(
                    str(final),
                    f"holds an install from another bundle {plan.bundle_version} manifest (not "
                    f"{plan.manifest_sha256[:12]}); remove it, then upgrade again",
                )
            self.details.update(installed="already there")
            self.say(
                f"admin host: vigil {plan.vigil_version} (bundle {plan.bundle_version}) already in {final}"
            )
            return
        started = time.monotonic()
        self.say(
            f"admin host: installing vigil {plan.vigil_version} (bundle {plan.bundle_version}) into {final}"
        )
        staging = Path(tempfile.mkdtemp(prefix=f".staging-{plan.dirname}-", dir=self.root))
        try:
            self._install(bundle, plan, staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.details.update(installed="new", install_seconds=round(time.monotonic() - started, 1))

    def switch(self) -> None:
        """Step 7: ``current`` to the prepared version, atomically (a link made beside, renamed)."""
        plan = self._plan
        if plan is None:
            return
        link = self.root / CURRENT
        if self._previous is not None and self._previous.dirname == plan.dirname:
            self.details.update(switched=False, current=plan.dirname)
            return
        read_current(self.root)  # still vigil's link (or none): it may not be a directory by now
        tmp = self.root / f".{CURRENT}.{os.getpid()}.{time.monotonic_ns()}"
        os.symlink(plan.dirname, tmp)
        try:
            os.replace(tmp, link)
        except OSError as exc:
            os.unlink(tmp)
            raise AdminInstallError(str(link), f"cannot switch: {exc.strerror}") from None
        fsync_dir(self.root)
        self.details.update(switched=True, current=plan.dirname)
        old = self._previous.dirname if self._previous else "none"
        self.say(f"admin host: {link} -> {plan.dirname} (was {old})")
        self._prune(keep={plan.dirname, old})

    def _prune(self, keep: set[str]) -> None:
        """Step 8: as the hosts keep two versions of a component, the root keeps ``current`` and the
        one before it (a rollback's switch is then a rename), and the version this vigil runs from.
        Only a real directory of vigil's name with an install record is removed; anything else is
        left and said."""
        running = Path(sys.prefix).resolve()
        removed: list[str] = []
        for entry in sorted(os.listdir(self.root)):
            if entry in keep or not _DIRNAME.fullmatch(entry):
                continue
            try:
                there = read_installed(self.root, entry)
            except DeployError as exc:
                self.say(f"admin host: left {exc}")
                continue
            if there.path.resolve() == running:
                continue
            shutil.rmtree(there.path)
            removed.append(entry)
        if removed:
            self.details.update(removed=removed)
            self.say(f"admin host: removed {', '.join(removed)} (older than the two kept)")

    # --- the install -------------------------------------------------------------------------

    def _install(self, bundle: StoredBundle, plan: AdminPlan, staging: Path, final: Path) -> None:
        wheels, venv, tmp = staging / "wheels", staging / "venv", staging / "tmp"
        wheels.mkdir(mode=0o700)
        tmp.mkdir(mode=0o700)
        for w in plan.wheels:  # 4
            _copy_checked(bundle.files / w.path, wheels / w.filename, w.size, w.sha256)
        req = staging / "requirements.txt"
        lines: dict[str, list[str]] = {}
        for w in plan.wheels:
            lines.setdefault(f"{w.project}=={w.version}", []).append(f"--hash=sha256:{w.sha256}")
        write_file_atomic(req, "".join(f"{k} {' '.join(v)}\n" for k, v in sorted(lines.items())).encode())
        env = _clean_env(tmp)
        pip = str(_pip_wheel() / "pip")  # pip's own way to run from its wheel
        self._run(
            [self.python, "-I", "-m", "venv", "--without-pip", str(venv)],
            env,
            "making the virtual environment",
        )  # 5
        py = str(venv / "bin" / "python")
        self._run(
            [
                py,
                "-I",
                pip,
                "install",
                "--no-index",
                "--no-cache-dir",
                "--only-binary",
                ":all:",
                "--find-links",
                str(wheels),
                "--require-hashes",
                "--no-compile",
                "--quiet",
                "-r",
                str(req),
            ],
            env,
            "pip install",
        )
        got = self._run(
            [py, "-I", "-c", "import importlib.metadata as m; print(m.version('vigil'))"],
            env,
            "vigil's version",
        ).strip()
        if got != plan.vigil_version:
            raise AdminInstallError(
                str(final), f"installed vigil says {got}, the bundle {plan.vigil_version}"
            )
        _relocate(venv, final)  # 6
        try:  # byte code now, with the final paths in it; a module that does not compile is read as source
            self._run(
                [py, "-I", "-m", "compileall", "-q", "-s", str(venv), "-p", str(final), str(venv / "lib")],
                env,
                "compiling",
            )
        except AdminInstallError as exc:
            self.say(f"admin host: {exc} (those modules are read from source)")
        write_file_atomic(
            venv / RECORD,
            (
                json.dumps(
                    {**plan.record(), "installed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                    indent=1,
                    sort_keys=True,
                )
                + "\n"
            ).encode(),
        )
        for dirpath, dirnames, filenames in os.walk(venv):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022:
                    os.chmod(p, stat.S_IMODE(st.st_mode) & ~0o022)
        os.chmod(venv, 0o755)  # noqa: S103 - a program for the admins to run; nothing in it is secret
        try:
            os.rename(venv, final)  # fails if something took the name meanwhile: nothing is replaced
        except OSError as exc:
            raise AdminInstallError(
                str(final), f"cannot rename the staged install there: {exc.strerror}"
            ) from None
        fsync_dir(self.root)
        try:
            self._run([str(final / "bin" / "vigil"), "--help"], env, "vigil --help")
        except AdminInstallError:
            shutil.rmtree(final, ignore_errors=True)
            raise

    def _run(self, argv: list[str], env: dict[str, str], what: str) -> str:
        try:
            res = subprocess.run(  # noqa: S603 - the interpreter, pip's wheel and paths vigil made
                argv,
                env=env,
                capture_output=True,
                text=True,
                timeout=PIP_TIMEOUT,
                cwd=env["TMPDIR"],
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AdminInstallError(str(self.root), f"{what}: {exc}") from None
        if res.returncode != 0:
            lines = [ln.strip() for ln in (res.stderr + res.stdout).splitlines() if ln.strip()]
            why = next((ln for ln in lines if "ERROR" in ln or "Error" in ln), lines[-1] if lines else "")
            if "DO NOT MATCH THE HASHES" in res.stderr:
                bad = re.findall(r"([^/\s]+\.whl)", res.stderr)
                raise AdminRefused(
                    f"wheel {bad[0] if bad else '?'}",
                    "does not match the signed manifest's sha256 as pip installs it; refused, "
                    f"{self.root / CURRENT} unchanged",
                )
            raise AdminInstallError(str(self.root), f"{what} failed (exit {res.returncode}): {why[:300]}")
        return res.stdout


def _pip_wheel() -> Path:
    """The interpreter's own pip wheel, the one ``python3 -m venv`` would install (Debian's
    python3-venv brings it under /usr/share/python-wheels, a python.org build in ensurepip's
    ``_bundled``). pip runs from it, in the new environment's interpreter, without being installed:
    the versions hold only the bundle's wheels, and a new one takes a second, not the half a minute
    that installing and compiling pip into each took on this project's 2-core machine."""
    dirs = [sysconfig.get_config_var("WHEEL_PKG_DIR")]
    try:
        import ensurepip  # noqa: PLC0415 - only to find its directory

        dirs.append(os.path.join(os.path.dirname(ensurepip.__file__), "_bundled"))
    except ImportError:
        pass
    dirs.append("/usr/share/python-wheels")
    for d in dirs:
        if d and os.path.isdir(d):
            found = sorted(Path(d).glob("pip-*-py3-none-any.whl"), key=_release)
            if found:
                return found[-1]
    raise AdminInstallError(
        sys.executable,
        "has no pip wheel to install with (Debian: install python3-venv, which brings python3-pip-whl)",
    )


def _release(path: Path) -> tuple[int, ...]:
    """pip-23.2.1-py3-none-any.whl -> (23, 2, 1)."""
    return tuple(int(x) for x in re.findall(r"\d+", path.name.split("-")[1])[:4])


def _copy_checked(src: Path, dest: Path, size: int, sha256: str) -> None:
    """Copy a wheel out of the store while hashing it; refuse it unless it is the manifest's."""
    h = hashlib.sha256()
    done = 0
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise TamperedFile(str(src), f"cannot read: {exc.strerror}") from None
    with open(fd, "rb") as fh, open(dest, "xb") as out:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
            done += len(chunk)
            if done > size:
                break
            out.write(chunk)
    if done != size or h.hexdigest() != sha256:
        raise TamperedFile(
            str(src), "changed in the store since it was imported (its sha256 is not the manifest's)"
        )


def _relocate(venv: Path, final: Path) -> None:
    """Rewrite the staging path to the final one where a virtual environment writes it down: the
    interpreter line of each script in bin/ (pip's and ensurepip's), the activate scripts, and
    pyvenv.cfg's ``command``. Links (bin/python) are left alone."""
    old, new = str(venv).encode(), str(final).encode()
    targets = [p for p in (venv / "bin").iterdir()] + [venv / "pyvenv.cfg"]
    for p in targets:
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode):
            continue
        data = p.read_bytes()
        if old in data:
            p.write_bytes(data.replace(old, new))
