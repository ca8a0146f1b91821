"""Link types down to the network layer.

For each LINKTYPE pcapgro understands, find where the network-layer header
starts and which protocol it is.  Everything before that offset is the
"MAC header" GRO compares between packets of one flow (net/core/gro.c,
gro_list_prepare: the 14-byte Ethernet header; net/8021q/vlan_core.c,
vlan_gro_receive: each in-band 802.1Q/802.1ad tag).

Link types: EN10MB (1) with 802.1Q (0x8100) / 802.1ad (0x88a8) tags,
stacked (the two TPIDs the kernel's VLAN GRO handler registers,
net/8021q/vlan_core.c; a 0x9100 tag is not walked, so such frames pass); LINUX_SLL (113); LINUX_SLL2 (276); RAW (101, and DLT_RAW
12 / 14 as some systems write it); IPV4 (228); IPV6 (229); NULL (0) and
LOOP (108).  Anything else has no network layer for pcapgro and passes
through untouched.
"""

import struct

__all__ = ["ETH_P_IP", "ETH_P_IPV6", "ETH_P_TEB", "network_layer", "LINKTYPE_NAMES"]

ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_TEB = 0x6558        # transparent Ethernet bridging (an Ethernet frame inside GRE/Geneve)
_VLAN_TPIDS = (0x8100, 0x88A8)

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
DLT_RAW_12 = 12
DLT_RAW_14 = 14

LINKTYPE_NAMES = {
    0: "NULL", 1: "EN10MB", 12: "RAW", 14: "RAW", 101: "RAW", 108: "LOOP",
    113: "LINUX_SLL", 228: "IPV4", 229: "IPV6", 276: "LINUX_SLL2",
}

# BSD address families seen in NULL/LOOP headers for IPv6 (OS dependent).
_AF_INET = 2
_AF_INET6 = (10, 24, 28, 30)

_u16 = struct.Struct("!H").unpack_from
_u32le = struct.Struct("<I").unpack_from
_u32be = struct.Struct("!I").unpack_from


def _raw_version(data, off):
    if len(data) <= off:
        return None
    v = data[off] >> 4
    if v == 4:
        return ETH_P_IP
    if v == 6:
        return ETH_P_IPV6
    return None


def network_layer(linktype, data):
    """Locate the network layer of one captured frame.

    Args:
        linktype: LINKTYPE_* value of the frame's interface.
        data:     the captured bytes.

    Returns:
        ``(offset, ethertype, vlan_tags)``: offset in bytes of the IPv4/IPv6
        header, its EtherType (0x0800 or 0x86dd) and the number of in-band
        VLAN tags crossed (EN10MB only; they count toward GRO's size limit).
        ``(None, None, 0)`` when the frame carries no IPv4/IPv6 packet pcapgro
        can reach (other EtherType, unknown link type, header cut short).

    Never raises on malformed input.
    """
    n = len(data)
    if linktype == LINKTYPE_ETHERNET:
        if n < 14:
            return None, None, 0
        off = 12
        tags = 0
        et = _u16(data, off)[0]
        while et in _VLAN_TPIDS:
            off += 4
            tags += 1
            if n < off + 2:
                return None, None, 0
            et = _u16(data, off)[0]
        if et == ETH_P_IP or et == ETH_P_IPV6:
            return off + 2, et, tags
        return None, None, 0
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6, DLT_RAW_12, DLT_RAW_14):
        et = _raw_version(data, 0)
        return (0, et, 0) if et else (None, None, 0)
    if linktype == LINKTYPE_LINUX_SLL:
        if n < 16:
            return None, None, 0
        et = _u16(data, 14)[0]
        return (16, et, 0) if et in (ETH_P_IP, ETH_P_IPV6) else (None, None, 0)
    if linktype == LINKTYPE_LINUX_SLL2:
        if n < 20:
            return None, None, 0
        et = _u16(data, 0)[0]
        return (20, et, 0) if et in (ETH_P_IP, ETH_P_IPV6) else (None, None, 0)
    if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        if n < 4:
            return None, None, 0
        fam = _u32be(data, 0)[0] if linktype == LINKTYPE_LOOP else _u32le(data, 0)[0]
        if linktype == LINKTYPE_NULL and fam > 0xFFFF:  # written big-endian
            fam = _u32be(data, 0)[0]
        if fam == _AF_INET:
            return 4, ETH_P_IP, 0
        if fam in _AF_INET6:
            return 4, ETH_P_IPV6, 0
        return None, None, 0
    return None, None, 0
