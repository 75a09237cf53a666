#!/bin/sh
# Bring the bundle's Slurm hosts up from a bare OS, or apply this bundle to the running cluster by the impact
# of each change (apply.py reads what the hosts run now; a run with nothing changed reports changed=0), then
# run the production checks on the controller:
#
#     bringup/up.sh HOSTS.yaml [ansible-playbook options, e.g. --tags checks, --check --diff]
#
# HOSTS.yaml is your inventory: each host of bringup/inventory.yaml with `ansible_host` (its address) and
# how to reach it (`ansible_user`, `ansible_ssh_private_key_file`); it never goes in the bundle.
# Needs ansible-core (pip install -r bringup/requirements.txt) and python3 on the machine that runs it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 HOSTS.yaml [ansible-playbook options]" >&2; exit 2; }
exec python3 "$here/apply.py" "$@"
