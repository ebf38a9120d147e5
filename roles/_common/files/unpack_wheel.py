"""Unpack vigil's exporters wheel into a versioned directory, with the host's own python3 (no pip).

Run by the `dcgm_exporter` and `slurm_exporter` roles (`python3 - WHEEL HOME VERSION SHA256 KEEP`, this
file on stdin). Steps:

1. the wheel's sha256 must equal the bundle manifest's, or nothing is touched (exit 2);
2. `HOME/VERSION/.vigil-wheel-sha256` already names that sha256: print `unchanged`, exit 0;
3. unpack into `HOME/.VERSION.tmp-PID` (zipfile drops absolute and `..` member paths), byte-compile it
   (the unit may not write `__pycache__`), root-owned, 0644 files / 0755 dirs, then write the marker;
4. swap it in by renames (the old tree moves aside first, then is removed) and print `unpacked`;
5. keep the newest KEEP version directories by ctime (the one just installed always stays) and print
   `pruned NAME` for each one removed.

Python 3.9 and the standard library only: it runs on the target.
"""

import compileall
import hashlib
import os
import shutil
import sys
import zipfile

MARKER = ".vigil-wheel-sha256"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def main(argv):
    wheel, home, version, want, keep = argv[0], argv[1], argv[2], argv[3], int(argv[4])
    if "/" in version or version in ("", ".", ".."):
        print(f"FAIL: {wheel}: bad version {version!r}", file=sys.stderr)
        return 2
    got = sha256(wheel)
    if got != want:  # 1
        print(f"FAIL: {wheel}: sha256 {got}, the bundle says {want}", file=sys.stderr)
        return 2
    target = os.path.join(home, version)
    if read(os.path.join(target, MARKER)) == want:  # 2
        print("unchanged")
    else:  # 3
        stage = os.path.join(home, f".{version}.tmp-{os.getpid()}")
        shutil.rmtree(stage, ignore_errors=True)
        os.makedirs(stage, 0o755)
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(stage)
        compileall.compile_dir(stage, quiet=1)
        for root, dirs, files in os.walk(stage):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)  # noqa: S103 - installed code, world-readable
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
        with open(os.path.join(stage, MARKER), "w") as fh:
            fh.write(want + "\n")
        os.chmod(os.path.join(stage, MARKER), 0o644)
        os.chmod(stage, 0o755)  # noqa: S103 - installed code, world-readable
        old = os.path.join(home, f".{version}.old-{os.getpid()}")
        if os.path.lexists(target):  # 4
            os.rename(target, old)
        os.rename(stage, target)
        shutil.rmtree(old, ignore_errors=True)
        print("unpacked")
    versions = []  # 5
    for name in os.listdir(home):
        path = os.path.join(home, name)
        if not name.startswith(".") and os.path.isdir(path) and not os.path.islink(path) and name != version:
            versions.append((os.stat(path).st_ctime, name))
    for _, name in sorted(versions, reverse=True)[max(keep - 1, 0) :]:
        shutil.rmtree(os.path.join(home, name))
        print(f"pruned {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
