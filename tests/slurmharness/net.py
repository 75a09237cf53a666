"""Free TCP ports for the daemons of a test cluster (slurmctld, slurmdbd, each slurmd, mysqld)."""
from __future__ import annotations

import random
import socket


def _port_block_free(first: int, count: int) -> bool:
    for port in range(first, first + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                return False
    return True


def free_port_block(count: int) -> int:
    """First port of `count` consecutive free TCP ports, below Linux's ephemeral range."""
    rng = random.Random()  # random start: parallel test processes rarely pick the same block
    for _ in range(200):
        first = rng.randrange(20000, 32000 - count)
        if _port_block_free(first, count):
            return first
    raise RuntimeError(f"no {count} consecutive free TCP ports found in 20000-32000")
