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
    "path": "path", "dir": "path", "exe": "path",
    "perm": "perm",
    "arch": "arch",
    "auid": "id", "uid": "id", "euid": "id", "suid": "id", "fsuid": "id",
    "gid": "id", "egid": "id", "sgid": "id", "fsgid": "id",
    "success": "bool", "exit": "number", "pid": "number", "ppid": "number",
    "key": "key", "filetype": "filetype",
}
FIELD = re.compile(r"^([a-z_]+)(!=|<=|>=|&=|=|<|>|&)(.+)$")
FILETYPES = {"file", "dir", "socket", "link", "character", "block", "fifo"}
LISTS = {"exit", "task", "user", "exclude", "filesystem"}
ACTIONS = {"always", "never"}


def _path(value):
    if not value.startswith("/"):
        return "path %r is not absolute" % value
    if any(c.isspace() for c in value) or "\\" in value:
        return "path %r holds whitespace or a backslash" % value
    if "/../" in value + "/" or "/./" in value + "/":
        return "path %r has '.' or '..' components" % value
    return None


def _field(spec):
    m = FIELD.match(spec)
    if not m:
        return "-F %r is not field<op>value" % spec
    name, op, value = m.groups()
    kind = FIELDS.get(name)
    if kind is None:
        return "-F field %r is not one vigil uses (%s)" % (name, ", ".join(sorted(FIELDS)))
    if kind == "path":
        if op not in ("=", "!="):
            return "-F %s takes = or !=, not %s" % (name, op)
        return _path(value)
    if kind == "perm":
        return None if PERMS.match(value) else "-F perm=%r must be made of r, w, x, a" % value
    if kind == "arch":
        return None if value in ("b32", "b64") else "-F arch=%r must be b32 or b64" % value
    if kind == "id":
        return None if NUMBER.match(value) or value in ("unset", "-1") else "-F %s=%r is not a number" % (name, value)
    if kind in ("bool", "number"):
        return None if NUMBER.match(value) else "-F %s=%r is not a number" % (name, value)
    if kind == "key":
        return None if KEY.match(value) else "key %r: 1-31 of A-Z a-z 0-9 _ . : -" % value
    if kind == "filetype":
        return None if value in FILETYPES else "-F filetype=%r is not one of %s" % (value, ", ".join(sorted(FILETYPES)))
    return None


def check_line(words):
    """Problems of one rule line, already split into words."""
    opt = words[0]
    if opt == "-D":
        return ["-D deletes every rule; leave it to the base rules file"]
    if opt in ("-b", "--backlog_wait_time", "-r"):
        if len(words) != 2 or not NUMBER.match(words[1]):
            return ["%s takes one number" % opt]
        return []
    if opt == "-f":
        return [] if words[1:] in (["0"], ["1"], ["2"]) else ["-f takes 0, 1 or 2"]
    if opt == "-e":
        return [] if words[1:] in (["0"], ["1"], ["2"]) else ["-e takes 0, 1 or 2"]
    if opt == "-w":
        return _watch(words)
    if opt in ("-a", "-A"):
        return _syscall_rule(words)
    return ["unknown option %r (vigil's rules use -w, -a, -e, -b, -f, -r, --backlog_wait_time)" % opt]


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
            problems.append("%s needs a value" % opt)
            break
        value = rest[i + 1]
        if opt == "-p":
            if not PERMS.match(value):
                problems.append("-p %r must be made of r, w, x, a" % value)
        elif opt == "-k":
            if not KEY.match(value):
                problems.append("key %r: 1-31 of A-Z a-z 0-9 _ . : -" % value)
        else:
            problems.append("-w takes -p and -k, not %r" % opt)
        if opt in seen:
            problems.append("%s given twice" % opt)
        seen.add(opt)
        i += 2
    if "-k" not in seen:
        problems.append("-w %s has no key (-k): its events could not be found by key" % words[1])
    return problems


def _syscall_rule(words):
    problems = []
    if len(words) < 2:
        return ["%s needs list,action" % words[0]]
    parts = words[1].split(",")
    if len(parts) != 2 or not (set(parts) & LISTS and set(parts) & ACTIONS):
        problems.append("%s %r must be list,action such as always,exit" % (words[0], words[1]))
    fields = []
    syscalls = []
    keyed = False
    rest = words[2:]
    i = 0
    while i < len(rest):
        opt = rest[i]
        if i + 1 >= len(rest):
            problems.append("%s needs a value" % opt)
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
                    problems.append("-S %r is not a system call name" % name)
            syscalls.append(value)
        elif opt == "-k":
            keyed = True
            if not KEY.match(value):
                problems.append("key %r: 1-31 of A-Z a-z 0-9 _ . : -" % value)
        else:
            problems.append("%s takes -F, -S and -k, not %r" % (words[0], opt))
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
            problems.append("%s:%d: cannot be split into words: %s" % (name, number, e))
            continue
        if not words:
            continue
        if lock_line is not None:
            problems.append("%s:%d: rule after -e on line %d: -e must come last" % (name, number, lock_line))
        if words[0] == "-e":
            lock_line = number
        problems.extend("%s:%d: %s" % (name, number, why) for why in check_line(words))
    return problems


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: check_audit_rules.py FILE\n")
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        sys.stderr.write("%s: cannot read: %s\n" % (argv[1], e))
        return 1
    problems = check_text(text, argv[1])
    for p in problems:
        sys.stderr.write(p + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
