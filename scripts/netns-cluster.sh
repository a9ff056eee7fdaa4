#!/bin/sh
# A two-"node" cluster on one machine: two network namespaces, each with its own address (and, through
# `agent`, its own host name), each joined by a veth pair to a bridge in a third namespace (the switch), so
# Open MPI runs across them over TCP as across two hosts: mpirun starts in node 0 and reaches node 1 through
# its remote agent (plm_rsh_agent) instead of ssh. Losing a node (`kill`) removes its namespace and its cable;
# the other node keeps its link and address, as a host keeps its network when another one dies.
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2's `ip`; `check` says why not (exit 77 = skip).
#
#   netns-cluster.sh check                   exit 0 when a cluster can be made here, else 77 and the reason
#   netns-cluster.sh up NAME                 make NAME's nodes NAME-n0, NAME-n1 (10.231.0.1 and .2, on
#                                            interfaces NAMEa and NAMEb) and their switch NAME-sw
#   netns-cluster.sh down NAME               remove them (and their processes); safe to repeat
#   netns-cluster.sh exec NAME I CMD...      run CMD on node I (0 or 1) as that host
#   netns-cluster.sh agent HOST CMD...       Open MPI's remote agent: HOST is a node's address or name
#   netns-cluster.sh mpirun NAME ARGS...     mpirun on node 0 with the agent and TCP kept to the veth subnet
#   netns-cluster.sh hostfile NAME [SLOTS]   print an Open MPI hostfile of both nodes (SLOTS each, default 1)
#   netns-cluster.sh kill NAME I             lose node I: kill every process in it, then remove the namespace
#
# NAME is at most 10 characters of [a-z0-9] (it names the interfaces, which have 15); use a unique one
# (e.g. zn$$) and `down` it in a trap. Addresses are the same in every cluster: each pair of namespaces is
# its own network, so clusters made at once do not meet. Nothing is added to the host's own namespace.
set -eu

SUBNET=10.231.0
die() {
    echo "netns-cluster.sh: $*" >&2
    exit 1
}
name_ok() {
    case "$1" in
    '' | *[!a-z0-9]*) die "NAME '$1': use 1-10 characters of [a-z0-9]" ;;
    esac
    [ ${#1} -le 10 ] || die "NAME '$1' is longer than 10 characters (it names veth interfaces)"
}
ns() { echo "$1-n$2"; }
host_of() { echo "$1-node$2"; }

# The namespace that owns address or host name $1 (agent's lookup): every cluster's namespaces are listed by
# `ip netns`, and the name carries the node index.
ns_of_host() {
    case "$1" in
    *-node0 | *-node1)
        echo "${1%-node?}-n${1##*-node}"
        return
        ;;
    esac
    [ -n "${NETNS_CLUSTER:-}" ] || die "agent: host '$1' is an address; set NETNS_CLUSTER=NAME (mpirun does)"
    case "$1" in
    "$SUBNET.1") ns "$NETNS_CLUSTER" 0 ;;
    "$SUBNET.2") ns "$NETNS_CLUSTER" 1 ;;
    *) die "agent: host '$1' is not a node of cluster $NETNS_CLUSTER ($SUBNET.1, $SUBNET.2)" ;;
    esac
}

# Runs "$@" (already one shell command line, or argv) in namespace $2 with host name $3: a UTS namespace of
# its own gives each node its name, and /etc/hosts of the namespace (ip netns exec mounts /etc/netns/NS/hosts)
# resolves both nodes' names.
in_node() {
    nsname=$1
    host=$2
    shift 2
    [ -e "/run/netns/$nsname" ] || die "node $host ($nsname) is gone"
    exec ip netns exec "$nsname" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
check)
    [ "$(id -u)" = 0 ] || {
        echo "needs root (network namespaces); running as uid $(id -u)"
        exit 77
    }
    command -v ip >/dev/null 2>&1 || {
        echo "iproute2's ip is not installed (apt-get install iproute2)"
        exit 77
    }
    command -v unshare >/dev/null 2>&1 || {
        echo "unshare (util-linux) is not installed"
        exit 77
    }
    probe="znprobe$$"
    if ! err=$(ip netns add "$probe" 2>&1); then
        echo "cannot make a network namespace here ($err): needs CAP_SYS_ADMIN and CAP_NET_ADMIN"
        exit 77
    fi
    ok=1
    err=$(ip link add "${probe}a" type veth peer name "${probe}b" 2>&1) || ok=0
    [ $ok = 1 ] && ip link del "${probe}a" 2>/dev/null || true
    [ $ok = 1 ] && { err=$(ip netns exec "$probe" unshare --uts true 2>&1) || ok=0; }
    [ $ok = 1 ] && { err=$(ip -n "$probe" link add "${probe}br" type bridge 2>&1) || ok=0; }
    ip netns del "$probe" 2>/dev/null || true
    [ $ok = 1 ] || {
        echo "cannot make a veth pair, a bridge or a UTS namespace here: $err"
        exit 77
    }
    exit 0
    ;;
up)
    [ $# = 1 ] || die "usage: up NAME"
    name_ok "$1"
    n0=$(ns "$1" 0)
    n1=$(ns "$1" 1)
    [ ! -e "/run/netns/$n0" ] && [ ! -e "/run/netns/$n1" ] && [ ! -e "/run/netns/$1-sw" ] ||
        die "cluster $1 exists; 'down $1' first"
    # half-made clusters are removed before the error is reported
    trap '"$0" down "$1" >/dev/null 2>&1 || true' EXIT
    sw="$1-sw"
    ip netns add "$sw"
    ip -n "$sw" link set lo up
    ip -n "$sw" link add "${1}br" type bridge
    ip -n "$sw" link set "${1}br" up
    for i in 0 1; do
        nsname=$(ns "$1" $i)
        end=$(printf '%s' ab | cut -c$((i + 1)))
        ip netns add "$nsname"
        mkdir -p "/etc/netns/$nsname"
        printf '127.0.0.1 localhost\n%s.1 %s\n%s.2 %s\n' "$SUBNET" "$(host_of "$1" 0)" "$SUBNET" \
            "$(host_of "$1" 1)" >"/etc/netns/$nsname/hosts"
        ip -n "$nsname" link set lo up
        # the node's end is NAMEa / NAMEb, the switch's end NAMEsa / NAMEsb
        ip link add "${1}${end}" type veth peer name "${1}s${end}"
        ip link set "${1}${end}" netns "$nsname"
        ip link set "${1}s${end}" netns "$sw"
        ip -n "$sw" link set "${1}s${end}" master "${1}br"
        ip -n "$sw" link set "${1}s${end}" up
        ip -n "$nsname" addr add "$SUBNET.$((i + 1))/24" dev "${1}${end}"
        ip -n "$nsname" link set "${1}${end}" up
    done
    trap - EXIT
    echo "cluster $1: $(host_of "$1" 0) $SUBNET.1 (namespace $n0), $(host_of "$1" 1) $SUBNET.2 (namespace $n1)," \
        "switch $1-sw"
    ;;
down)
    [ $# = 1 ] || die "usage: down NAME"
    name_ok "$1"
    for i in 0 1; do
        nsname=$(ns "$1" $i)
        if [ -e "/run/netns/$nsname" ]; then
            # processes left in a namespace keep it (and its veth end) alive after `ip netns del`
            pids=$(ip netns pids "$nsname" 2>/dev/null || true)
            [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
            ip netns del "$nsname" 2>/dev/null || true
        fi
        rm -rf "/etc/netns/$nsname"
    done
    [ ! -e "/run/netns/$1-sw" ] || ip netns del "$1-sw" 2>/dev/null || true
    # a veth end in the host namespace (an `up` stopped half-way) goes with its peer
    for end in a b sa sb; do ip link del "${1}${end}" 2>/dev/null || true; done
    ;;
exec)
    [ $# -ge 3 ] || die "usage: exec NAME I CMD..."
    name_ok "$1"
    c=$1
    i=$2
    shift 2
    in_node "$(ns "$c" "$i")" "$(host_of "$c" "$i")" "$@"
    ;;
agent)
    # Open MPI calls its rsh agent as `AGENT HOST COMMAND-WORDS...`, the words meant for a remote shell (as
    # ssh joins them), so they are joined and run by sh in the node.
    [ $# -ge 2 ] || die "usage: agent HOST CMD..."
    host=$1
    shift
    nsname=$(ns_of_host "$host")
    case "$host" in
    "$SUBNET.1") host=$(host_of "$NETNS_CLUSTER" 0) ;;
    "$SUBNET.2") host=$(host_of "$NETNS_CLUSTER" 1) ;;
    esac
    in_node "$nsname" "$host" sh -c "$*"
    ;;
mpirun)
    [ $# -ge 1 ] || die "usage: mpirun NAME ARGS..."
    name_ok "$1"
    c=$1
    shift
    self=$(readlink -f "$0")
    export NETNS_CLUSTER="$c"
    in_node "$(ns "$c" 0)" "$(host_of "$c" 0)" mpirun --mca plm_rsh_agent "$self agent" \
        --mca btl_tcp_if_include "$SUBNET.0/24" --mca oob_tcp_if_include "$SUBNET.0/24" \
        --mca btl self,vader,tcp -x NETNS_CLUSTER "$@"
    ;;
hostfile)
    [ $# -ge 1 ] || die "usage: hostfile NAME [SLOTS]"
    name_ok "$1"
    echo "$(host_of "$1" 0) slots=${2:-1}"
    echo "$(host_of "$1" 1) slots=${2:-1}"
    ;;
kill)
    [ $# = 2 ] || die "usage: kill NAME I"
    name_ok "$1"
    nsname=$(ns "$1" "$2")
    [ -e "/run/netns/$nsname" ] || die "node $2 of cluster $1 is not up"
    pids=$(ip netns pids "$nsname")
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
    ip netns del "$nsname"
    rm -rf "/etc/netns/$nsname"
    ;;
*)
    die "usage: netns-cluster.sh check | up NAME | down NAME | exec NAME I CMD... | agent HOST CMD... | mpirun NAME ARGS... | hostfile NAME [SLOTS] | kill NAME I"
    ;;
esac
