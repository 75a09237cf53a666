#!/bin/sh
# accounts.sh of cluster research-lab: the tenants as Slurm accounts (fair-share shares, QOS, GPU caps)
# and their users. Written by `orchgen plan workload.yaml` for fleet research-lab. Run it where sacctmgr reaches slurmdbd (as
# root or the SlurmUser) once slurmdbd runs: before slurmctld on a new cluster (README.md, bring-up
# order), and again whenever the input or a tenant's Unix group changes.
#
# Safe to run again. It adds what is missing and sets what differs; it removes only user associations
# that it added itself and that the input no longer wants (a user taken off `users`, or gone from the
# Unix group), recorded in $ORCHGEN_ACCOUNTS_STATE. It never removes an account, a QOS, or anything
# an administrator made. A Unix group that does not resolve removes nobody. It holds no password.
set -eu

cluster=research-lab
# "account user" pairs this script added, one per line: the only associations it may remove.
state=${ORCHGEN_ACCOUNTS_STATE:-/var/lib/orchgen/accounts-$cluster.users}
mkdir -p "$(dirname "$state")"
touch "$state"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/wanted"     # "account user" pairs the input wants now
: >"$work/unresolved" # accounts whose Unix group did not resolve: none of their users is removed

say() {
    printf 'accounts.sh: %s\n' "$*" >&2
}

existing=0
if ! sacctmgr -n -P list cluster where name="$cluster" format=cluster | grep -qx "$cluster"; then
    sacctmgr -i add cluster "$cluster"
fi

# ---------------------------------------------------------------- QOS
qos_exists() {
    sacctmgr -n -P list qos where name="$1" format=name | grep -Fqx "$1"
}

# GPU limits (GrpTRES=gres/gpu=N ...) need the gres/gpu TRES in slurmdbd, which slurmctld adds when it first
# registers (AccountingStorageTRES=gres/gpu); sacctmgr refuses them before ("no TRES known by type gres/gpu").
# On a new cluster this script runs before slurmctld's first start (README: bring-up order), so it sets those
# limits when it runs again after slurmctld started, and says so.
gpu_tres() {
    sacctmgr -n -P list tres format=type,name | grep -qx 'gres|gpu'
}

# gpu_limit ENTITY NAME KEY=VALUE...: sacctmgr modify ENTITY (qos, account) NAME set the GPU limits, if it can yet
gpu_limit() {
    entity=$1
    name=$2
    shift 2
    if gpu_tres; then
        if [ "$entity" = account ]; then
            sacctmgr -i modify account where name="$name" cluster="$cluster" set "$@" >/dev/null
        else
            sacctmgr -i modify qos where name="$name" set "$@" >/dev/null
        fi
    else
        say "$entity $name: $* waits for slurmctld's first start (it adds the gres/gpu TRES): run accounts.sh again then"
    fi
}
# `normal` (slurmdbd creates it) may preempt `scavenger` (slurm.conf: PreemptType=preempt/qos,
# PreemptMode=REQUEUE). Values, each a site's to tune:
#   normal Priority=10: with PriorityWeightQOS, normal jobs go before scavenger jobs of a tenant;
#   scavenger Priority=0: last in line;
#   scavenger UsageFactor=0: soaking up idle GPUs does not count against the tenant's fair share;
#   scavenger Flags=NoReserve: backfill holds no nodes for scavenger jobs, so they never delay others;
#   scavenger PreemptMode=requeue: a preempted scavenger job goes back to the queue (add
#     GraceTime=SECONDS if your jobs checkpoint on SIGTERM before they are requeued).
qos_exists scavenger || sacctmgr -i add qos scavenger
sacctmgr -i modify qos where name=scavenger set Priority=0 UsageFactor=0 Flags+=NoReserve PreemptMode=requeue >/dev/null
qos_exists normal || sacctmgr -i add qos normal
sacctmgr -i modify qos where name=normal set Priority=10 Preempt+=scavenger >/dev/null

# ---------------------------------------------------------------- accounts
# A field of the account's own association on this cluster (empty if it has none).
account_field() {
    sacctmgr -n -P list associations where cluster="$cluster" account="$1" format="user,$2" |
        sed -n 's/^|//p' | head -n 1
}

has_account() {
    sacctmgr -n -P list associations where cluster="$cluster" account="$1" format=user | grep -qx ''
}

# tenant ACCOUNT SHARE MAX_GPUS ("-": no cap) [QOS DEFAULT_QOS]. The cap (GrpTRES) counts every running job
# of the tenant, its scavenger jobs too; Slurm preempts for nodes, not to get a tenant under its limit.
# QOS (tenants[].slurm_qos) is the account's whole QOS list and DEFAULT_QOS its DefaultQOS, set as given.
tenant() {
    account=$1
    share=$2
    max_gpus=$3
    own_qos=${4:-}
    own_default=${5:-}
    if ! has_account "$account"; then
        sacctmgr -i add account "$account" cluster="$cluster" fairshare="$share" \
            description="tenant $account" organization="$cluster"
    elif [ "$existing" = 1 ]; then
        return 0 # an account of the existing slurmdbd keeps its share, QOS and limits
    elif [ "$(account_field "$account" fairshare)" != "$share" ]; then
        sacctmgr -i modify account where name="$account" cluster="$cluster" set fairshare="$share"
    fi
    if [ -n "$own_qos" ]; then
        # the tenant's own list replaces what the account may use (sacctmgr(1) QOS=, DefaultQOS=, which
        # must be one of them); sorted, as slurmdbd lists them in its own order
        if [ "$(account_field "$account" qos | tr ',' '\n' | sort | paste -sd, -)" != "$own_qos" ] \
            || [ "$(account_field "$account" defaultqos)" != "$own_default" ]; then
            sacctmgr -i modify account where name="$account" cluster="$cluster" \
                set qos="$own_qos" defaultqos="$own_default" >/dev/null
        fi
    else
    # both QOS, added to whatever else the account may use
    sacctmgr -i modify account where name="$account" cluster="$cluster" \
        set qos+=normal,scavenger >/dev/null
    if [ -z "$(account_field "$account" defaultqos)" ]; then
        sacctmgr -i modify account where name="$account" cluster="$cluster" set defaultqos=normal >/dev/null
    fi
    fi
    if [ "$max_gpus" != "-" ]; then
        gpu_limit account "$account" GrpTRES=gres/gpu="$max_gpus"
    fi
}

# ---------------------------------------------------------------- users
has_user() {
    sacctmgr -n -P list associations where cluster="$cluster" account="$1" user="$2" format=user | grep -Fqx "$2"
}

# member ACCOUNT USER: the user must have an association with the account
member() {
    printf '%s %s\n' "$1" "$2" >>"$work/wanted"
    if ! has_user "$1" "$2"; then
        sacctmgr -i add user "$2" account="$1" cluster="$cluster" >/dev/null
        grep -Fqx "$1 $2" "$state" || printf '%s %s\n' "$1" "$2" >>"$state"
        say "added user $2 to account $1"
    fi
}

# group ACCOUNT GROUP: every member of the Unix group (its member list, and the users whose primary
# group it is) joins the account
group() {
    if ! entry=$(getent group "$2"); then
        say "warning: Unix group $2 (tenant $1) does not resolve here: nobody added or removed for it"
        printf '%s\n' "$1" >>"$work/unresolved"
        return 0
    fi
    gid=$(printf '%s\n' "$entry" | cut -d: -f3)
    {
        printf '%s\n' "$entry" | cut -d: -f4 | tr ',' '\n'
        getent passwd | awk -F: -v gid="$gid" '$4 == gid { print $1 }'
    } | tr '[:upper:]' '[:lower:]' | sed '/^$/d' | sort -u >"$work/members" # sacctmgr keeps user names lower-case
    while read -r user <&3; do
        member "$1" "$user"
    done 3<"$work/members"
}

# Remove the associations this script added that the input no longer wants; a user left without a
# default account gets one of their remaining accounts on this cluster.
prune() {
    : >"$work/state"
    while read -r account user <&3; do
        if grep -Fqx "$account $user" "$work/wanted" || grep -Fqx "$account" "$work/unresolved" \
            || ! has_user "$account" "$user"; then
            if has_user "$account" "$user"; then
                printf '%s %s\n' "$account" "$user" >>"$work/state"
            fi
            continue
        fi
        if sacctmgr -i remove user where name="$user" account="$account" cluster="$cluster" >/dev/null; then
            say "removed user $user from account $account"
            default=$(sacctmgr -n -P list users where name="$user" format=defaultaccount)
            other=$(sacctmgr -n -P list associations where cluster="$cluster" user="$user" format=account | head -n 1)
            if [ -z "$default" ] && [ -n "$other" ]; then
                sacctmgr -i modify user where name="$user" set defaultaccount="$other" >/dev/null
            fi
        else
            say "warning: could not remove user $user from account $account (running jobs?); will retry"
            printf '%s %s\n' "$account" "$user" >>"$work/state"
        fi
    done 3<"$state"
    cat "$work/state" >"$state"
}

tenant nlp 3 -
tenant vision 1 -
prune
