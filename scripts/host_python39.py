"""Prepare a Python 3.9 from Debian 11's packages, to run the host-side code's tests on.

The roles' modules and scripts and the exporters run on the hosts' own python3, 3.9 or newer
(`common_min_python_version`). This makes that interpreter from Debian 11 (bullseye), whose
python3 is 3.9, without touching the host's apt or Python:

1. ``apt-get update`` and ``apt-get download`` with an apt configuration of vigil's own
   (vigil.bundle.fetchers._apt.AptEnv, as the debian-next channel uses: the host's /etc/apt is
   neither read nor changed; the indexes are checked against Debian's archive keyring);
2. ``dpkg -x`` of the interpreter, its standard library and the shared libraries it needs that
   Debian 12 does not have (libssl1.1, libffi7) or may not have installed (libmpdec3);
3. a launcher, ``python3.9``, that puts those libraries on LD_LIBRARY_PATH; ``ldd`` finds every
   library of the interpreter and its extension modules, and ``ssl``, ``hashlib``, ``json``,
   ``ctypes`` and ``decimal`` import;
4. the test tools for 3.9 (pytest, ...), pinned below, with pip into ``site/``;
5. everything byte-compiled by the 3.9 itself: importing writes nothing into the folder later.

Usage, with the project's venv (it imports vigil.*)::

    .venv/bin/python scripts/host_python39.py [--cache DIR]

prints the launcher's path. The interpreter is made once, in ``<cache>/python3.9/`` (the cache:
--cache, else $VIGIL_CACHE, else /var/cache/vigil)::

    python3.9    the launcher: LD_LIBRARY_PATH for the libraries, then usr/bin/python3.9
    usr/         the unpacked packages: usr/bin/python3.9, usr/lib/python3.9, the libraries
    site/        the test tools, for sys.path (never for PYTHONPATH: the venv's tools would read them)
    VERSIONS     the packages and wheels in it, one per line
    MANIFEST     every entry below the folder: kind, mode, owner and sha256 of each file
    READY        written last: the digest of the recipe it was made from

It is made in a stage folder beside it and renamed into place whole. A folder there is used only
when READY names this recipe and every entry matches MANIFEST; otherwise it is made again, saying
why on stderr. A symbolic link at its path, or a cache folder others may write to, is refused.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from vigil.basics.atomic import fsync_dir, write_file_atomic
from vigil.basics.errors import VigilError
from vigil.bundle.catalog_model import AptSettings, AptSource
from vigil.bundle.fetchers._apt import AptEnv

NAME = "python3.9"
DEFAULT_CACHE = Path("/var/cache/vigil")
MIRROR = "http://deb.debian.org/debian"
SUITE = "bullseye"  # Debian 11: python3 is 3.9
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"  # holds Debian 11's archive keys
DEBS = (
    "python3.9-minimal",
    "libpython3.9-minimal",
    "libpython3.9-stdlib",
    "libssl1.1",  # _ssl, _hashlib (Debian 12 has libssl3)
    "libffi7",  # _ctypes (Debian 12 has libffi8)
    "libmpdec3",  # _decimal (in Debian 12 too, but not installed with its python3)
)
#: pytest and what the host-side tests import, for 3.9, exact. pip evaluates the dependencies'
#: markers for the interpreter it runs on (3.11), not for 3.9, so the whole closure is named here
#: (exceptiongroup, tomli and typing-extensions are what 3.9 needs beyond 3.11) and installed with
#: --no-deps.
WHEELS = (
    "pytest==8.4.2",
    "pluggy==1.6.0",
    "iniconfig==2.1.0",
    "packaging==26.3",
    "pygments==2.21.0",
    "exceptiongroup==1.3.2",
    "tomli==2.5.0",
    "typing-extensions==4.16.0",
    "pytest-timeout==2.4.0",
    "cryptography==50.0.2",
    "cffi==2.0.0",
    "pycparser==2.23",
    "PyYAML==6.0.3",
)
MULTIARCH = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
#: made last, read first: the folder is complete and was made from this recipe
READY = "READY"
MANIFEST = "MANIFEST"
#: what the made interpreter must do
SMOKE = (
    "import sys, ssl, hashlib, json, ctypes, decimal\n"
    "assert sys.version_info[:2] == (3, 9), sys.version\n"
    "assert hashlib.sha256(b'').hexdigest().startswith('e3b0c442')\n"
    "assert json.loads('[1]') == [1] and ctypes.sizeof(ctypes.c_int) == 4\n"
    "print('.'.join(map(str, sys.version_info[:3])), ssl.OPENSSL_VERSION)\n"
)
LAUNCHER = """#!/bin/sh
# Python 3.9 from Debian 11's packages (scripts/host_python39.py), with their libraries.
here=$(dirname -- "$(readlink -f -- "$0")")
LD_LIBRARY_PATH="$here/usr/lib/{multiarch}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
export LD_LIBRARY_PATH
exec "$here/usr/bin/python3.9" "$@"
"""


class Refused(VigilError):
    """A cache path this script will not use."""

    outcome = "refused"


def recipe(arch: str) -> str:
    """The digest of what the folder is made from: a change to any of it makes it again."""
    text = json.dumps(
        {"format": 2, "mirror": MIRROR, "suite": SUITE, "arch": arch, "debs": DEBS, "wheels": WHEELS},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def host_arch() -> str:
    out = subprocess.run(
        ["dpkg", "--print-architecture"],  # noqa: S607 - Debian's dpkg, found on PATH
        capture_output=True,
        text=True,
        check=False,
    )
    arch = out.stdout.strip()
    if out.returncode != 0 or arch not in MULTIARCH:
        found = arch or out.stderr.strip()
        raise VigilError("dpkg --print-architecture", f"{found!r} is not one of {sorted(MULTIARCH)}")
    return arch


# --- the manifest -------------------------------------------------------------------------------


def _nofollow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb", opener=_nofollow) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest(root: Path) -> list[str]:
    """One line per entry below ``root`` (links are listed, never followed), sorted; READY and
    MANIFEST themselves are left out."""
    lines = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in dirnames + filenames:
            path = base / name
            rel = path.relative_to(root).as_posix()
            if rel in (READY, MANIFEST):
                continue
            st = path.lstat()
            head = f"{stat.S_IMODE(st.st_mode):04o} {st.st_uid}"
            if stat.S_ISLNK(st.st_mode):
                lines.append(f"l {head} {rel} -> {os.readlink(path)}")
            elif stat.S_ISDIR(st.st_mode):
                lines.append(f"d {head} {rel}")
            elif stat.S_ISREG(st.st_mode):
                lines.append(f"f {head} {rel} {_sha256(path)}")
            else:
                lines.append(f"? {head} {rel}")
    return sorted(lines)


def _read(path: Path) -> str:
    with open(path, "rb", opener=_nofollow) as f:
        return f.read().decode("utf-8", "replace")


def _ours(path: Path, st: os.stat_result) -> None:
    """Refuse a folder another user owns or may write to (it could swap what this script checked)."""
    if st.st_uid != os.geteuid():
        raise Refused(str(path), f"owned by uid {st.st_uid}, not by this user ({os.geteuid()})")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise Refused(str(path), f"others may write to it (mode {stat.S_IMODE(st.st_mode):04o})")


def inspect(dest: Path, digest: str) -> str:
    """Why ``dest`` is not an interpreter made from recipe ``digest``, whole ("" when it is).

    Refused: a link, or something other than a folder of this user's that only it may write to.
    """
    try:
        st = dest.lstat()
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        raise Refused(str(dest), "is a symbolic link; remove it (the interpreter is made in place)")
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(str(dest), "is not a folder; remove it")
    _ours(dest, st)
    try:
        ready = _read(dest / READY).strip()
    except OSError:
        return f"no {READY} marker: an unfinished or damaged copy"
    if ready != digest:
        return "made from another recipe"
    try:
        want = _read(dest / MANIFEST).splitlines()
    except OSError:
        return f"no {MANIFEST}: a damaged copy"
    have = manifest(dest)
    if have != want:
        differ = sorted(set(have) ^ set(want))
        return f"damaged: {differ[0].split(' ')[3]} differs from {MANIFEST} ({len(differ)} lines)"
    return ""


# --- making it ----------------------------------------------------------------------------------


def _run(
    argv: list[str], *, obj: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        res = subprocess.run(  # noqa: S603 - argv built here: Debian's tools, pip, the launcher
            argv, cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except OSError as e:
        raise VigilError(obj, f"{argv[0]}: {e.strerror or e}") from None
    if res.returncode != 0:
        text = res.stderr or res.stdout
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("W:")]
        raise VigilError(obj, f"{' '.join(argv[:3])}: {lines[-1] if lines else f'exit {res.returncode}'}")
    return res


def _unlink_escaping_links(root: Path) -> None:
    """Remove the links that point out of ``root`` (sitecustomize.py -> /etc/python3.9/...): the
    interpreter must read nothing of this host's Python."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                target = os.readlink(path)
                resolved = os.path.normpath(os.path.join(dirpath, target))
                if os.path.isabs(target) or not resolved.startswith(str(root) + os.sep):
                    path.unlink()


def make(stage: Path, arch: str, digest: str) -> None:
    """Make the interpreter in the empty folder ``stage``; READY is written last."""
    obj = str(stage)
    multiarch = MULTIARCH[arch]
    # 1 apt, vigil's own configuration, below the stage (removed once the packages are unpacked)
    sources = AptSettings(sources=(AptSource(MIRROR, SUITE, ("main",)),), keyring=KEYRING)
    apt = AptEnv(sources, arch, stage / ".apt", channel=f"{SUITE}-{NAME}")
    apt.prepare(update=True, obj=f"{MIRROR} {SUITE}")
    debs = stage / ".debs"
    debs.mkdir()
    env = dict(os.environ, LC_ALL="C", APT_CONFIG=str(apt.config_file))
    _run(["apt-get", "download", "-q", *DEBS], obj=f"{MIRROR} {SUITE}", cwd=debs, env=env)
    # 2 unpacked, the links out of the folder removed
    versions = []
    for deb in sorted(debs.glob("*.deb")):
        fields = _run(["dpkg-deb", "-f", str(deb), "Package", "Version"], obj=str(deb)).stdout
        versions.append(" ".join(line.split(": ", 1)[1] for line in fields.splitlines()))
        _run(["dpkg", "-x", str(deb), str(stage)], obj=str(deb))
    if len(versions) != len(DEBS):
        raise VigilError(obj, f"apt-get download gave {len(versions)} packages, not {len(DEBS)}")
    shutil.rmtree(debs)
    shutil.rmtree(stage / ".apt")
    _unlink_escaping_links(stage)
    # 3 the launcher, then the checks: every library found, the modules the tests need import
    launcher = stage / NAME
    write_file_atomic(launcher, LAUNCHER.format(multiarch=multiarch).encode(), mode=0o755)
    libs = {"LD_LIBRARY_PATH": str(stage / "usr" / "lib" / multiarch)}
    binaries = [stage / "usr" / "bin" / NAME, *sorted((stage / "usr/lib/python3.9/lib-dynload").glob("*.so"))]
    for binary in binaries:
        out = _run(["ldd", str(binary)], obj=str(binary), env=dict(os.environ, **libs)).stdout
        missing = [ln.split()[0] for ln in out.splitlines() if "not found" in ln]
        if missing:
            raise VigilError(
                binary.name, f"needs {', '.join(missing)}: add the Debian {SUITE} package that has it to DEBS"
            )
    version = _run([str(launcher), "-I", "-c", SMOKE], obj=str(launcher)).stdout.split()[0]
    # 4 the test tools, for exactly this version
    site = stage / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
    pip += ["--no-compile", "--only-binary=:all:", "--python-version", version, "--target", str(site)]
    _run([*pip, *WHEELS], obj="pip install (Python 3.9 test tools)")
    shutil.rmtree(site / "bin", ignore_errors=True)  # scripts for the running python: not ours
    probe = f"import sys; sys.path.insert(0, {str(site)!r})\n"
    probe += "import pytest, pytest_timeout, cryptography.x509, yaml\n"
    _run([str(launcher), "-I", "-c", probe], obj=str(site))
    # 5 byte-compiled now, so that no later import writes a __pycache__ here (MANIFEST would differ)
    compileall = [str(launcher), "-I", "-m", "compileall", "-q", "-j", "0"]
    _run([*compileall, str(stage / "usr/lib/python3.9"), str(site)], obj=str(stage))
    write_file_atomic(stage / "VERSIONS", "".join(f"{v}\n" for v in [*versions, *WHEELS]).encode())
    seal(stage, digest)


def seal(stage: Path, digest: str) -> None:
    """MANIFEST of everything in ``stage``, then READY: the last file written."""
    write_file_atomic(stage / MANIFEST, "".join(f"{ln}\n" for ln in manifest(stage)).encode())
    write_file_atomic(stage / READY, f"{digest}\n".encode(), fsync=True)


def _remove_leftovers(cache: Path) -> None:
    """The stage and moved-aside folders in ``cache`` (this user's own, never through a link)."""
    for prefix in (f".{NAME}.stage-", f".{NAME}.old-"):
        for path in cache.glob(f"{prefix}*"):
            if path.is_dir() and not path.is_symlink() and path.lstat().st_uid == os.geteuid():
                shutil.rmtree(path)


@contextlib.contextmanager
def _locked(cache: Path) -> Iterator[None]:
    """One maker at a time per cache (a second waits, then finds the folder made)."""
    fd = os.open(cache / f".{NAME}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def prepare(cache: Path, *, arch: str | None = None) -> Path:
    """The launcher of the interpreter in ``cache``, made first when it is missing or not whole."""
    cache = Path(cache).absolute()
    try:
        cache.mkdir(parents=True, exist_ok=True, mode=0o755)
        st = cache.lstat()
    except OSError as e:
        raise VigilError(str(cache), f"cannot make the cache folder: {e.strerror or e}") from None
    if stat.S_ISLNK(st.st_mode):
        raise Refused(str(cache), "is a symbolic link; name the folder itself")
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(str(cache), "is not a folder")
    _ours(cache, st)
    dest = cache / NAME
    arch = arch or host_arch()
    digest = recipe(arch)
    with _locked(cache):
        why = inspect(dest, digest)
        if not why:
            return dest / NAME
        if why != "missing":
            print(f"{dest}: {why}; making it again", file=sys.stderr)
        _remove_leftovers(cache)  # of an interrupted run
        stage = Path(tempfile.mkdtemp(prefix=f".{NAME}.stage-", dir=cache))
        try:
            make(stage, arch, digest)
            stage.chmod(0o755)
            if why != "missing":  # ours, checked above: moved aside, then removed
                aside = Path(tempfile.mkdtemp(prefix=f".{NAME}.old-", dir=cache))
                dest.rename(aside / NAME)
            stage.rename(dest)
            fsync_dir(cache)
        finally:
            _remove_leftovers(cache)
        why = inspect(dest, digest)
        if why:
            raise VigilError(str(dest), f"just made, yet {why}")
    return dest / NAME


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--cache", type=Path, help=f"the cache folder (default $VIGIL_CACHE, else {DEFAULT_CACHE})"
    )
    args = parser.parse_args(argv)
    cache = args.cache or Path(os.environ.get("VIGIL_CACHE") or DEFAULT_CACHE)
    try:
        print(prepare(cache))
    except VigilError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
