#!/usr/bin/env python3
"""Can this host use kernel auditing? Asks the kernel for its audit status (AUDIT_GET) over netlink.

Prints one JSON object: {"available": bool, "enabled": int | null, "reason": str}. `enabled` is
the kernel's audit switch: 0 off, 1 on, 2 on and locked (rules immutable until reboot). Runs on
the host with its system python3 (>= 3.9), standard library only; changes nothing.
"""

import errno
import json
import os
import socket
import struct
import sys

NETLINK_AUDIT = 9
AUDIT_GET = 1000
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
HEADER = struct.Struct("=IHHII")


def probe():
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_AUDIT)
    except OSError as e:
        return {
            "available": False,
            "enabled": None,
            "reason": f"no audit netlink socket: {os.strerror(e.errno or errno.EIO)} "
            "(a container's seccomp filter, or a kernel without CONFIG_AUDIT)",
        }
    with sock:
        sock.settimeout(3)
        sock.bind((0, 0))
        sock.send(HEADER.pack(HEADER.size, AUDIT_GET, NLM_F_REQUEST | NLM_F_ACK, 1, 0))
        for _ in range(3):
            try:
                data = sock.recv(65536)
            except OSError as e:
                return {
                    "available": False,
                    "enabled": None,
                    "reason": f"no answer to AUDIT_GET: {os.strerror(e.errno or errno.EIO)}",
                }
            _, kind, _, _, _ = HEADER.unpack_from(data)
            if kind == NLMSG_ERROR:
                (err,) = struct.unpack_from("=i", data, HEADER.size)
                if err == 0:
                    continue  # the ack; the status comes next (or came first)
                why = os.strerror(-err)
                if -err == errno.EPERM:
                    why += " (the kernel takes audit control only from the initial PID namespace, as root)"
                return {"available": False, "enabled": None, "reason": "AUDIT_GET refused: " + why}
            if kind == AUDIT_GET:
                _mask, enabled = struct.unpack_from("=II", data, HEADER.size)
                return {"available": True, "enabled": enabled, "reason": ""}
    return {"available": False, "enabled": None, "reason": "AUDIT_GET: no status in the answer"}


if __name__ == "__main__":
    json.dump(probe(), sys.stdout)
    sys.stdout.write("\n")
