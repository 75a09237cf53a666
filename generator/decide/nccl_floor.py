"""The bus-bandwidth floors of the NCCL production checks, on both planes (checks/checks.json).

Slurm: nccl-tests all_reduce_perf between two nodes (render/bringup); Kubernetes: the all_reduce of the
`kube-nccl` check (render/kubernetes/nccl_check.py).
"""

# nccl-tests all_reduce_perf bus bandwidth (GB/s) below which the two-node check fails, per fabric kind:
# about half the line rate of one 400 Gb/s NDR port (50 GB/s) per GPU rail on InfiniBand, a 400 GbE RoCE
# port likewise, and of a 100 GbE port on plain Ethernet (NCCL's sockets path). A site tunes it in
# checks/checks.json; nccl-tests' README ("Performance") defines busbw.
BUSBW_FLOOR_GBPS = {"infiniband": 20.0, "roce": 15.0, "ethernet": 5.0}
# Where every GPU node's compute rails are known (a platform or pool.nics), the floor is a share of what
# the rails carry instead: all_reduce's busbw between two nodes is bounded by a node's compute rails
# together (nccl-tests doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n, "the speed of the slowest link";
# NCCL runs one ring channel per rail, so a node's rails carry its busbw side by side), in GB/s = Gb/s / 8.
# A healthy pair reaches 85-95% of that; a rail down or a ring over TCP falls far below.
BUSBW_RAIL_SHARE = 0.8
# Inside a multi-node NVLink domain (GB200 NVL72), NCCL sends between the nodes over NVLink, not the rails,
# whenever the job holds an IMEX channel (Slurm's switch/nvidia_imex gives every job one; a Kubernetes
# ComputeDomain claim does too): its channel lines then say "via P2P/MNNVL" (NCCL src/transport/p2p.cc), never
# "via NET/IB", and the run measures NVLink. NCCL_MNNVL_ENABLE=0 turns that off (NCCL src/init.cc MNNVL_ENABLE,
# default 2 = when available; NCCL's troubleshooting guide, "Multi-node NVLink (MNNVL) issues"), so the checks'
# two nodes talk over their compute rails, which the transport and the floor above are about.
MNNVL_OFF = ("NCCL_MNNVL_ENABLE", "0")
