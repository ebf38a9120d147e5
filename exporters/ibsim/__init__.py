"""A simulated InfiniBand sysfs tree (``class/infiniband``) for the lab, read by the real node_exporter.

See :mod:`.tree`.
"""

from __future__ import annotations
