"""Frame check sequences (FCS) at the end of captured frames.

A capture states that its frames end in an FCS in classic pcap's link-type
field (bit 26 set, the length in 16-bit words in bits 28-31; libpcap's
LT_FCS_DATALINK_EXT) and in pcapng as an IDB's ``if_fcslen`` option.
pcapgro keeps that statement (both readers give it as the Interface's
``if_fcslen`` option, both writers write it back) and keeps the FCS on
every frame it passes unchanged.  A frame it rewrites or makes (a GSO
segment, a forwarded frame with its TTL decremented, a completed checksum)
gets the FCS the wire would carry: for Ethernet the CRC-32 over the frame
(IEEE 802.3 clause 3.2.9), recomputed.  Other FCS kinds (2-byte, or on
other link types) are not computed: the splitter and the forwarder leave
such frames unchanged.
"""

from __future__ import annotations

import zlib

from .record import Interface, Section

__all__ = ["OPT_FCSLEN", "fcs_option", "InterfaceFCS", "ETH_FCS", "with_fcs", "refresh_fcs"]

OPT_FCSLEN = 13     # pcapng IDB option if_fcslen: FCS length (bytes, as Wireshark reads it)
ETH_FCS = 4         # the Ethernet FCS: CRC-32, least significant byte first


def fcs_option(options):
    """The FCS length in bytes an Interface's ``if_fcslen`` option gives,
    or None without one.  Wireshark reads the value as bytes, the pcapng
    draft says bits: 16 and 32 (no FCS is that many bytes long) are taken
    as bits."""
    for code, v in options:
        if code == OPT_FCSLEN and len(v) == 1:
            return v[0] // 8 if v[0] in (16, 32) else v[0]
    return None


class InterfaceFCS:
    """Follows Section and Interface events: the FCS length (bytes, 0 when
    none or unknown) and link type of each interface of the current
    section."""

    __slots__ = ("_ifs",)

    def __init__(self):
        self._ifs = []

    def event(self, ev):
        """Take note of ``ev`` when it is a Section or an Interface; returns
        ``(fcs_len, linktype)`` of an Interface, else None."""
        t = type(ev)
        if t is Section:
            self._ifs = []
        elif t is Interface:
            r = (fcs_option(ev.options) or 0, ev.linktype)
            self._ifs.append(r)
            return r
        return None

    def get(self, iface):
        """``(fcs_len, linktype)`` of interface ``iface`` (``(0, None)``
        for an interface not seen)."""
        ifs = self._ifs
        if 0 <= iface < len(ifs):
            return ifs[iface]
        return 0, None


def _crc(b):
    return zlib.crc32(b).to_bytes(4, "little")


def with_fcs(data, orig_len):
    """``(data, orig_len)`` of an Ethernet frame made without its FCS, with
    one: computed when the frame is whole in ``data``, else only counted in
    ``orig_len`` (it lies in the part a snaplen cut off)."""
    if len(data) >= orig_len:
        return bytes(data) + _crc(data), orig_len + ETH_FCS
    return data, orig_len + ETH_FCS


def refresh_fcs(data, orig_len):
    """``(data, orig_len)`` of an Ethernet frame that ends in an FCS and
    whose bytes were changed: the FCS recomputed when captured whole; cut
    off when a snaplen cut it (its captured bytes would be stale); as it
    is when not captured at all."""
    n = len(data)
    if orig_len < ETH_FCS:
        return data, orig_len
    body = orig_len - ETH_FCS
    if n >= orig_len:
        return bytes(data[:body]) + _crc(data[:body]), orig_len
    if n > body:
        return bytes(data[:body]), orig_len
    return data, orig_len
