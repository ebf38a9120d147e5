#!/usr/bin/env python3
"""Check an auditctl rules file before it is installed: `check_audit_rules.py FILE`.

auditctl has no dry run (`auditctl -R` loads), so a rules file is checked here first, line by
line, against the forms vigil's rules use: watches (`-w PATH -p PERMS -k KEY`), exit-filter rules
(`-a always,exit -F field=value ... -k KEY`) and the lock (`-e 2`, last). It refuses what would
make `auditctl -R` fail or do more than add rules: an unknown option or field, a relative or
spaced path, a bad permission set, a key over 31 bytes, `-D` (delete every rule: the base file's
job) and `-e` anywhere but at the end. Exit 0 and nothing printed when the file is fine;
otherwise exit 1 and one line per problem: `FILE:LINE: reason`.

Runs on the host (python3 >= 3.9, standard library only) and on the controller in tests.
"""

import re
import shlex
import sys

KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,31}$")
PERMS = re.compile(r"^[rwxa]{1,4}$")
NUMBER = re.compile(r"^-?[0-9]+$")
SYSCALL = re.compile(r"^[a-z0-9_]+$")
# -F fields vigil's rules may use, with what their value must look like.
FIELDS = {
    "path": "path",
    "dir": "path",
    "exe": "path",
    "perm": "perm",
    "arch": "arch",
    "auid": "id",
    "uid": "id",
    "euid": "id",
    "suid": "id",
    "fsuid": "id",
    "gid": "id",
    "egid": "id",
    "sgid": "id",
    "fsgid": "id",
    "success": "bool",
    "exit": "number",
    "pid": "number",
    "ppid": "number",
    "key": "key",
    "filetype": "filetype",
}
FIELD = re.compile(r"^([a-z_]+)(!=|<=|>=|&=|=|<|>|&)(.+)$")
FILETYPES = {"file", "dir", "socket", "link", "character", "block", "fifo"}
LISTS = {"exit", "task", "user", "exclude", "filesystem"}
ACTIONS = {"always", "never"}


def _path(value):
    if not value.startswith("/"):
        return f"path {value!r} is not absolute"
    if any(c.isspace() for c in value) or "\\" in value:
        return f"path {value!r} holds whitespace or a backslash"
    if "/../" in value + "/" or "/./" in value + "/":
        return f"path {value!r} has '.' or '..' components"
    return None


def _field(spec):
    m = FIELD.match(spec)
    if not m:
        return f"-F {spec!r} is not field<op>value"
    name, op, value = m.groups()
    kind = FIELDS.get(name)
    if kind is None:
        return "-F field {!r} is not one vigil uses ({})".format(name, ", ".join(sorted(FIELDS)))
    if kind == "path":
        if op not in ("=", "!="):
            return f"-F {name} takes = or !=, not {op}"
        return _path(value)
    if kind == "perm":
        return None if PERMS.match(value) else f"-F perm={value!r} must be made of r, w, x, a"
    if kind == "arch":
        return None if value in ("b32", "b64") else f"-F arch={value!r} must be b32 or b64"
    if kind == "id":
        return (
            None
            if NUMBER.match(value) or value in ("unset", "-1")
            else f"-F {name}={value!r} is not a number"
        )
    if kind in ("bool", "number"):
        return None if NUMBER.match(value) else f"-F {name}={value!r} is not a number"
    if kind == "key":
        return None if KEY.match(value) else f"key {value!r}: 1-31 of A-Z a-z 0-9 _ . : -"
    if kind == "filetype":
        return (
            None
            if value in FILETYPES
            else "-F filetype={!r} is not one of {}".format(value, ", ".join(sorted(FILETYPES)))
        )
    return None


def check_line(words):
    """Problems of one rule line, already split into words."""
    opt = words[0]
    if opt == "-D":
        return ["-D deletes every rule; leave it to the base rules file"]
    if opt in ("-b", "--backlog_wait_time", "-r"):
        if len(words) != 2 or not NUMBER.match(words[1]):
            return [f"{opt} takes one number"]
        return []
    if opt == "-f":
        return [] if words[1:] in (["0"], ["1"], ["2"]) else ["-f takes 0, 1 or 2"]
    if opt == "-e":
        return [] if words[1:] in (["0"], ["1"], ["2"]) else ["-e takes 0, 1 or 2"]
    if opt == "-w":
        return _watch(words)
    if opt in ("-a", "-A"):
        return _syscall_rule(words)
    return [f"unknown option {opt!r} (vigil's rules use -w, -a, -e, -b, -f, -r, --backlog_wait_time)"]


def _watch(words):
    problems = []
    if len(words) < 2:
        return ["-w needs a path"]
    why = _path(words[1])
    if why:
        problems.append(why)
    seen = set()
    rest = words[2:]
    i = 0
    while i < len(rest):
        opt = rest[i]
        if i + 1 >= len(rest):
            problems.append(f"{opt} needs a value")
            break
        value = rest[i + 1]
        if opt == "-p":
            if not PERMS.match(value):
                problems.append(f"-p {value!r} must be made of r, w, x, a")
        elif opt == "-k":
            if not KEY.match(value):
                problems.append(f"key {value!r}: 1-31 of A-Z a-z 0-9 _ . : -")
        else:
            problems.append(f"-w takes -p and -k, not {opt!r}")
        if opt in seen:
            problems.append(f"{opt} given twice")
        seen.add(opt)
        i += 2
    if "-k" not in seen:
        problems.append(f"-w {words[1]} has no key (-k): its events could not be found by key")
    return problems


def _syscall_rule(words):
    problems = []
    if len(words) < 2:
        return [f"{words[0]} needs list,action"]
    parts = words[1].split(",")
    if len(parts) != 2 or not (set(parts) & LISTS and set(parts) & ACTIONS):
        problems.append(f"{words[0]} {words[1]!r} must be list,action such as always,exit")
    fields = []
    syscalls = []
    keyed = False
    rest = words[2:]
    i = 0
    while i < len(rest):
        opt = rest[i]
        if i + 1 >= len(rest):
            problems.append(f"{opt} needs a value")
            break
        value = rest[i + 1]
        if opt == "-F":
            why = _field(value)
            if why:
                problems.append(why)
            fields.append(value.split("=", 1)[0].rstrip("!<>&"))
            keyed = keyed or value.startswith("key=")
        elif opt == "-S":
            for name in value.split(","):
                if not SYSCALL.match(name):
                    problems.append(f"-S {name!r} is not a system call name")
            syscalls.append(value)
        elif opt == "-k":
            keyed = True
            if not KEY.match(value):
                problems.append(f"key {value!r}: 1-31 of A-Z a-z 0-9 _ . : -")
        else:
            problems.append(f"{words[0]} takes -F, -S and -k, not {opt!r}")
        i += 2
    if syscalls and "arch" not in fields:
        problems.append("a rule with -S needs -F arch=b64 or b32 first (system call numbers differ)")
    if "perm" in fields and not ({"path", "dir"} & set(fields)):
        problems.append("-F perm needs -F path= or -F dir=")
    if not keyed:
        problems.append("rule has no key (-k): its events could not be found by key")
    return problems


def check_text(text, name="rules"):
    """Every problem of a rules file, as `name:line: reason`."""
    problems = []
    lock_line = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            problems.append(f"{name}:{number}: cannot be split into words: {e}")
            continue
        if not words:
            continue
        if lock_line is not None:
            problems.append(f"{name}:{number}: rule after -e on line {lock_line}: -e must come last")
        if words[0] == "-e":
            lock_line = number
        problems.extend(f"{name}:{number}: {why}" for why in check_line(words))
    return problems


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: check_audit_rules.py FILE\n")
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        sys.stderr.write(f"{argv[1]}: cannot read: {e}\n")
        return 1
    problems = check_text(text, argv[1])
    for p in problems:
        sys.stderr.write(p + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
