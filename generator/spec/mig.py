"""NVIDIA MIG profiles each GPU type offers, and how many instances of each fit on one GPU.

Sources (checked 2026-08):
- NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles" and "Supported GPUs"
  (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html): A30-24GB,
  A100-40GB, A100-80GB (the 40GB table's names scaled by memory), H100 80GB / 94GB (NVL) / 96GB (GH200),
  H200 141GB, B200 180GB, GB200 186GB;
- NVIDIA mig-parted's default configuration (deployments/systemd/config-default.yaml, the one the GPU
  Operator's MIG manager ships): the same profiles with their instance counts, per PCI device id,
  including GH200 144GB HBM3e and GB200 (1g.24gb x7 ... 7g.189gb).

Only the plain profiles: the media-extension variants (`1g.10gb+me`, one per GPU) are left out,
since `+` cannot appear in a Kubernetes extended-resource name and a Slurm GRES type alike.

Keys are GRES types as workload.yaml writes them (`gpu.type`); a generic type (`a100`, `h100`,
`gh200`) offers what any of its memory variants offers, the profile name itself naming the memory
size (`1g.5gb` exists only on A100-40GB).
"""
from __future__ import annotations

# profile -> instances per GPU
_A30 = {"1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1}
_A100_40 = {"1g.5gb": 7, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1}
_80GB = {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}  # A100/H100 80GB
_H100_94 = {"1g.12gb": 7, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1}  # H100 NVL
_H100_96 = {"1g.12gb": 7, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1}  # GH200 96GB
_GH200_144 = {"1g.18gb": 7, "1g.36gb": 4, "2g.36gb": 3, "3g.72gb": 2, "4g.72gb": 1, "7g.144gb": 1}
_H200 = {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1}
_B200 = {"1g.23gb": 7, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1}
_GB200 = {"1g.24gb": 7, "1g.47gb": 4, "2g.47gb": 3, "3g.95gb": 2, "4g.95gb": 1, "7g.189gb": 1}


def _union(*tables: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for table in tables:
        for profile, count in table.items():
            out[profile] = max(out.get(profile, 0), count)
    return out


PROFILES: dict[str, dict[str, int]] = {
    "a30": _A30,
    "a100-40gb": _A100_40,
    "a100-80gb": _80GB,
    "a100": _union(_A100_40, _80GB),
    "h100-80gb": _80GB,
    "h100-94gb": _H100_94,
    "h100-nvl": _H100_94,
    "h100-96gb": _H100_96,
    "h100": _union(_80GB, _H100_94, _H100_96),
    "h200": _H200,
    "gh200-96gb": _H100_96,
    "gh200-144gb": _GH200_144,
    "gh200": _union(_H100_96, _GH200_144),
    "b200": _B200,
    "gb200": _GB200,
}


def profiles_of(gpu_type: str) -> dict[str, int] | None:
    """The MIG profiles of a GRES type (`_` and `-` alike), or None when orchgen does not know it."""
    return PROFILES.get(gpu_type.lower().replace("_", "-"))
