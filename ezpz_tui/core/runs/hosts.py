"""A node's one name, however a hostfile, a scheduler or a rank's status spells it.

Plans, bad-host lists, failure reports and heatmaps all compare hosts that different tools
named: one rule here, below all of them, so that they agree on which node is which.
"""

from __future__ import annotations


def short_host(host: str) -> str:
    """``x3005c0s13b0n0.hsn.cm.polaris.alcf.anl.gov`` -> ``x3005c0s13b0n0``: hostfiles and
    scheduler lists mix short and full names for the same node."""
    return host.split(".")[0]
