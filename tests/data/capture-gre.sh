#!/usr/bin/env bash
# Real iperf3 traffic through a GRE / IPIP tunnel between two network
# namespaces (how tests/data/gre4-*.pcap and ipip4-*.pcap were made; as
# root, Linux 6.18).  That kernel has no gre/ipip devices, but its GRO
# handlers for GRE (gre_offload.c) and IPIP (af_inet.c) are built in and
# run on any veth's receive path.  So the tunnel endpoints are user-space
# relays (tools/tunrelay.py): iperf3 -> TUN -> relay -> outer IPv4 + GRE
# -> AF_PACKET on the veth -> receiver's veth (GRO on) -> relay -> TUN ->
# iperf3 server; the ACKs go back the same way.
# For each case: NAME-wire.pcap (frames leaving the sender's veth, offloads
# off there: wire-sized, full checksums) and NAME-gro.pcap (arriving at the
# receiver's veth, after its GRO).
#   gre4-bulk:    GRE without options (RFC 2784), outer IDs counting up, DF
#   gre4-keycsum: GRE with key 42 and checksum (RFC 2890)
#   ipip4-bulk:   IPv4 in IPv4 (protocol 4)
# Poll boundaries: a relay's send() from process context would run the
# receiver's NAPI after every frame, and nothing would merge.  So the
# receiver's veth runs threaded NAPI, its thread SCHED_FIFO 10 on CPU $CPU,
# and the sender's relay runs SCHED_FIFO 20 on the same CPU: it gathers
# what the TCP stack puts into its TUN until the TUN has been idle IDLE us
# (or 64 frames, the NAPI budget), sends the batch back to back (the NAPI
# thread cannot run meanwhile: one batch is one poll, as a NIC's interrupt
# coalescing hands a burst over), then waits GAP us before the next batch.
# So every poll end is a gap of more than 1 ms on the wire, which is what
# merge's default poll model (--poll-gap 1 ms) takes as a poll end.
# The outer packets are dropped on both veths' tc ingress (a classic BPF
# filter in direct-action mode; no nft/iptables here) after the relays and
# tcpdump have seen them: without a GRE/IPIP protocol handler the stack
# would answer each with ICMP protocol unreachable.
# Usage: capture-gre.sh OUTDIR  (SIZE=300K RATE=20M IDLE=300 GAP=2000 CPU=0 by default)
set -u
OUT=${1:?usage: capture-gre.sh OUTDIR}; mkdir -p "$OUT"
SIZE=${SIZE:-300K}; RATE=${RATE:-20M}; CPU=${CPU:-0}; IDLE=${IDLE:-300}; GAP=${GAP:-2000}
HERE=$(cd "$(dirname "$0")" && pwd); RELAY=$HERE/tools/tunrelay.py
ID=$$; NA=gr${ID}tx; NB=gr${ID}rx; A=gr${ID}a; B=gr${ID}b
PIDS=""
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null; done
  ip netns del $NA 2>/dev/null; ip netns del $NB 2>/dev/null
}
trap cleanup EXIT
ip netns add $NA; ip netns add $NB
ip link add $A netns $NA type veth peer name $B netns $NB
ip -n $NA addr add 10.88.0.1/24 dev $A; ip -n $NB addr add 10.88.0.2/24 dev $B
for n in $NA $NB; do ip -n $n link set lo up; done
ip netns exec $NA ethtool -K $A tx off tso off gso off gro off >/dev/null 2>&1
ip netns exec $NB ethtool -K $B gro on tso off gso off >/dev/null 2>&1
ip -n $NA link set $A up; ip -n $NB link set $B up
ip netns exec $NB sh -c "echo 1 > /sys/class/net/$B/threaded"
MA=$(ip netns exec $NA cat /sys/class/net/$A/address)
MB=$(ip netns exec $NB cat /sys/class/net/$B/address)
# ldh [12]; jeq 0x800 else pass; ldb [23]; jeq 47 or 4: TC_ACT_SHOT (2), else TC_ACT_UNSPEC (-1)
DROP='7,40 0 0 12,21 0 3 2048,48 0 0 23,21 2 0 47,21 1 0 4,6 0 0 4294967295,6 0 0 2'
for x in "$NA $A" "$NB $B"; do
  set -- $x
  tc -n $1 qdisc add dev $2 clsact
  tc -n $1 filter add dev $2 ingress bpf da bytecode "$DROP"
done
# the receiver's NAPI thread ("napi/<dev>-<id>") on CPU $CPU
NAPI=$(ps -eo pid=,comm= | awk -v n="napi/$B-" 'index($2, n) == 1 {print $1; exit}')
[ -n "$NAPI" ] || { echo "capture-gre.sh: no NAPI thread for $B" >&2; exit 1; }
taskset -pc $CPU $NAPI >/dev/null; chrt -f -p 10 $NAPI

ip netns exec $NB iperf3 -s >/dev/null 2>&1 & PIDS="$PIDS $!"

ready() { # ready FILE PID: wait for the relay's "ready"
  for _ in $(seq 50); do
    grep -q ready "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || break; sleep 0.1
  done
  echo "capture-gre.sh: a relay did not start" >&2; exit 1
}
case_() { # case_ NAME MODE FILTER MTU
  local name=$1 mode=$2 filt=$3 mtu=$4 p1 p2 ra rb
  FIRST_ID=4096 BATCH_IDLE_US=$IDLE BATCH_GAP_US=$GAP ip netns exec $NA chrt -f 20 taskset -c $CPU python3 "$RELAY" $mode tun0 $A \
    10.88.0.1 10.88.0.2 $MB 10.99.0.1/24 $mtu > "$OUT/.ra" & ra=$!; PIDS="$PIDS $ra"
  FIRST_ID=8192 ip netns exec $NB python3 "$RELAY" $mode tun0 $B \
    10.88.0.2 10.88.0.1 $MA 10.99.0.2/24 $mtu > "$OUT/.rb" & rb=$!; PIDS="$PIDS $rb"
  ready "$OUT/.ra" $ra; ready "$OUT/.rb" $rb
  ip netns exec $NA ping -c 2 -i 0.2 10.99.0.2 >/dev/null 2>&1
  ip netns exec $NA tcpdump --immediate-mode -Q out -U -s 0 -i $A -w "$OUT/$name-wire.pcap" $filt 2>/dev/null & p1=$!
  ip netns exec $NB tcpdump --immediate-mode -Q in -U -s 0 -i $B -w "$OUT/$name-gro.pcap" $filt 2>/dev/null & p2=$!
  sleep 1; timeout 30 ip netns exec $NA iperf3 -c 10.99.0.2 -n "$SIZE" -b "$RATE" >/dev/null 2>&1; sleep 1
  kill $p1 $p2; wait $p1 $p2 2>/dev/null
  kill $ra $rb; wait $ra $rb 2>/dev/null
  rm -f "$OUT/.ra" "$OUT/.rb"
}
case_ gre4-bulk gre "ip proto 47" 1476
case_ gre4-keycsum grekc "ip proto 47" 1468
case_ ipip4-bulk ipip "ip proto 4" 1480
