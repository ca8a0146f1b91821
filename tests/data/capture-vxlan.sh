#!/usr/bin/env bash
# Real iperf3 traffic through a VXLAN tunnel between two network namespaces
# (how tests/data/vxlan4-*.pcap were made; as root, Linux 6.18).
# For each case: NAME-wire.pcap (VXLAN frames leaving the sender's veth,
# offloads off on the veth and the vxlan device) and NAME-gro.pcap
# (arriving at the receiver's veth, after its GRO: the receiver's vxlan
# device holds the UDP tunnel socket on 4789 that makes GRO merge them).
#   vxlan4-bulk: outer UDP checksum 0 (the vxlan default for IPv4)
#   vxlan4-csum: outer UDP checksum set (vxlan "udpcsum")
# Usage: capture-vxlan.sh OUTDIR    (SIZE=600K RATE=20M by default; the files here: SIZE=300K)
set -u
OUT=${1:?usage: capture-vxlan.sh OUTDIR}; mkdir -p "$OUT"
SIZE=${SIZE:-600K}; RATE=${RATE:-20M}
ID=$$; NA=vx${ID}tx; NB=vx${ID}rx; A=vx${ID}a; B=vx${ID}b
SRV=""
cleanup() {
  [ -n "$SRV" ] && kill "$SRV" 2>/dev/null
  ip netns del $NA 2>/dev/null; ip netns del $NB 2>/dev/null
}
trap cleanup EXIT
ip netns add $NA; ip netns add $NB
ip link add $A netns $NA type veth peer name $B netns $NB
ip -n $NA addr add 10.88.0.1/24 dev $A; ip -n $NB addr add 10.88.0.2/24 dev $B
for n in $NA $NB; do ip -n $n link set lo up; done
ip -n $NA link set $A up; ip -n $NB link set $B up
ip netns exec $NA ethtool -K $A tx off tso off gso off gro off >/dev/null 2>&1
ip netns exec $NB ethtool -K $B gro on tso off gso off >/dev/null 2>&1
tunnel() { # tunnel EXTRA...: (re)make vx0 on both sides
  ip -n $NA link del vx0 2>/dev/null; ip -n $NB link del vx0 2>/dev/null
  ip -n $NA link add vx0 type vxlan id 42 local 10.88.0.1 remote 10.88.0.2 dstport 4789 dev $A "$@"
  ip -n $NB link add vx0 type vxlan id 42 local 10.88.0.2 remote 10.88.0.1 dstport 4789 dev $B "$@"
  ip -n $NA addr add 10.99.0.1/24 dev vx0; ip -n $NB addr add 10.99.0.2/24 dev vx0
  ip -n $NA link set vx0 up; ip -n $NB link set vx0 up
  ip netns exec $NA ethtool -K vx0 tx off tso off gso off >/dev/null 2>&1
  ip netns exec $NA ping -c 2 -i 0.2 10.99.0.2 >/dev/null 2>&1
}
cap() { # cap NAME
  local name=$1
  ip netns exec $NA tcpdump --immediate-mode -Q out -U -s 0 -i $A -w "$OUT/$name-wire.pcap" udp port 4789 2>/dev/null & local p1=$!
  ip netns exec $NB tcpdump --immediate-mode -Q in -U -s 0 -i $B -w "$OUT/$name-gro.pcap" udp port 4789 2>/dev/null & local p2=$!
  sleep 1; timeout 30 ip netns exec $NA iperf3 -c 10.99.0.2 -n "$SIZE" -b "$RATE" >/dev/null 2>&1; sleep 1
  kill $p1 $p2; wait $p1 $p2 2>/dev/null
}
ip netns exec $NB iperf3 -s >/dev/null 2>&1 & SRV=$!
sleep 0.5
tunnel noudpcsum; cap vxlan4-bulk
tunnel udpcsum; cap vxlan4-csum
