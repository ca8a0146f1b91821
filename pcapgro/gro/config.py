"""GRO engine configuration: the kernel's knobs, named as the kernel names them."""

from dataclasses import dataclass

__all__ = ["GROConfig", "GRO_LEGACY_MAX_SIZE", "GRO_MAX_SIZE", "GRO_HASH_BUCKETS",
           "MAX_GRO_SKBS"]

GRO_HASH_BUCKETS = 8          # lists per NAPI (net/core/gro.c)
MAX_GRO_SKBS = 8              # held packets per bucket
GRO_LEGACY_MAX_SIZE = 65536   # bytes; above it only plain TCP may grow
GRO_MAX_SIZE = 524280         # bytes (8 x 65535), largest gro_max_size


@dataclass
class GROConfig:
    """How the emulated receiver is set up.

    Attributes:
        gro_max_size:      bytes, exclusive limit on an aggregate's L3 length
                           (+ in-band VLAN tags); the kernel's gro_max_size /
                           gro_ipv4_max_size (default 65536, max 524280).
        verify_csum:       verify TCP checksums as the kernel does (a bad one
                           never merges); False = --no-verify-csum.
        csum:              'valid' (write a correct TCP checksum on
                           aggregates) or 'kernel' (the pseudo-header seed,
                           as the kernel leaves it: CHECKSUM_PARTIAL).
        hz:                kernel tick rate (jiffy = 1/hz s) for the "old
                           only" flush rule.
        napi_budget:       packets per NAPI poll (the driver's weight, 64 in
                           most drivers); 0 = a poll ends only at a gap.
        poll_model:        'gap' (a poll ends at an arrival gap over
                           ``poll_gap_ns``; the compiled loop runs it) or
                           'work' (polls follow the receiver's work:
                           :mod:`pcapgro.gro.napi`; Python paths only).
        poll_gap_ns:       a gap in arrival times longer than this ends a
                           NAPI poll (interrupt moderation); ns.
        poll_wake_ns:      work model: from a packet finding the device
                           idle to its poll's start, ns.
        poll_rx_ns:        work model: receive work per packet, ns.
        deliver_ns:        work model: handing a poll's packets up, fixed
                           part, ns.
        deliver_seg_ns:    work model: handing up, per packet of the poll,
                           ns (gro_normal_batch delivery).
        gro_flush_timeout: ns; 0 = every poll end completes everything
                           (the default); > 0 = polls only complete packets
                           from an older jiffy, the timer completes the rest
                           after this long without traffic.
        hash:              'flow' (each flow its own 32-bit flow hash, as
                           RSS or a local socket gives) or 'none' (hash 0:
                           all flows in bucket 0, as packets injected into a
                           veth by tcpreplay get).
        udp:               'off' (no UDP GRO: no UDP_GRO socket, no forwarding
                           feature, the kernel's default) or 'gro'
                           (rx-udp-gro-forwarding on, and every local UDP
                           socket has UDP_GRO enabled).
        fraglist:          rx-gro-list on: TCP flows without a local socket
                           and UDP flows without a UDP_GRO socket use
                           fraglist GRO (packets chained, not merged).
        local_ports:       destination ports that have a local socket (TCP:
                           standard GRO even with fraglist; UDP: a socket,
                           with UDP_GRO when udp='gro').
        vxlan_ports:       UDP ports with a VXLAN socket on the receiver
                           (vxlan_gro_receive): datagrams to them are merged
                           by their inner flow.  Empty (the default): a host
                           without the device, they are plain UDP.
        geneve_ports:      the same for Geneve (geneve_gro_receive).
        vlan_gro:          merge frames behind in-band 802.1Q/802.1ad tags, as a
                           kernel with the 8021q module does (its VLAN GRO
                           handler); False = a kernel built without
                           CONFIG_VLAN_8021Q (like the one the shared captures
                           were made on): tagged frames pass unmerged.
        compiled:          let the compiled core (pcapgro.gro.cfast) take
                           the records it models when it is built (same
                           results; False: the reference path only, for
                           tests).
        annotate:          attach pcapng comment + EPB flag bit 11 to
                           aggregates (only useful for pcapng output).
    """

    gro_max_size: int = GRO_LEGACY_MAX_SIZE
    verify_csum: bool = True
    csum: str = "valid"
    hz: int = 250
    napi_budget: int = 0
    poll_model: str = "gap"
    poll_gap_ns: int = 1_000_000
    # the work model's costs: fitted jointly to the 22 real veth pairs
    # (docs/napi-timing.md, "The work model's costs")
    poll_wake_ns: int = 28_000
    poll_rx_ns: int = 5_000
    deliver_ns: int = 10_000
    deliver_seg_ns: int = 2_000
    gro_flush_timeout: int = 0
    hash: str = "flow"
    udp: str = "off"
    fraglist: bool = False
    local_ports: frozenset = frozenset()
    vxlan_ports: frozenset = frozenset()
    geneve_ports: frozenset = frozenset()
    vlan_gro: bool = True
    compiled: bool = True
    annotate: bool = True
