"""``split --restore`` on a classic pcap, which cannot hold restore records.

pcapgro merge writes its restore records as pcapng comments; a classic
pcap (merge's output written as pcap, say) has none, and used to come back
unchanged with exit 0, which reads as "restored".  :func:`require_records`
refuses it (exit 2) as soon as a packet looks like an aggregate before any
of pcapgro's comments has been seen; a pcap without aggregates passes
unchanged.  A pcapng passes as before (merge's pcapng output holds records
for every aggregate it made; what it passed unmerged needs none).
"""

import os
import struct

from ..errors import UnusableInput
from ..linklayer import ETH_P_IP, network_layer
from ..record import Packet
from ..restore import carries_own

__all__ = ["require_records", "is_aggregate", "classic_pcap", "AGGREGATE_L3", "NO_RECORDS"]

AGGREGATE_L3 = 1500     # bytes: an L3 length above this (or 0) is an aggregate
NO_RECORDS = "no restore records: merge to pcapng to keep them"
_u16 = struct.Struct("!H").unpack_from
_PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1",
                b"\xa1\xb2\x3c\x4d", b"\x34\xcd\xb2\xa1", b"\xa1\xb2\xcd\x34")


def classic_pcap(path):
    """True when ``path`` (str / Path; '-' and None: False) is a regular
    file starting with a classic pcap magic (microsecond, nanosecond,
    modified; either byte order).  Never raises."""
    if path is None or str(path) == "-":
        return False
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as f:
            return f.read(4) in _PCAP_MAGICS
    except OSError:
        return False


def is_aggregate(pkt):
    """True when ``pkt`` (a Packet) is an IPv4/IPv6 packet longer than a
    1500-byte MTU allows: its IP length (from the length field; from the
    original frame length when the field is 0, as TSO and BIG TCP leave
    it) above AGGREGATE_L3 and within the frame.  Never raises."""
    data = pkt.data
    off, et, _ = network_layer(pkt.linktype, data)
    if off is None or len(data) < off + 20:
        return False
    wire = pkt.orig_len - off
    if et == ETH_P_IP:
        if data[off] >> 4 != 4 or data[off] & 15 < 5:
            return False
        n = _u16(data, off + 2)[0]
    else:
        if data[off] >> 4 != 6:
            return False
        n = _u16(data, off + 4)[0]
        n = n + 40 if n else 0
    n = n or wire
    return AGGREGATE_L3 < n <= wire


def require_records(events):
    """Pass ``events`` through unchanged, checking that the input holds
    restore records.

    Raises:
        UnusableInput: (exit 2, :data:`NO_RECORDS`) at the first aggregate
            (:func:`is_aggregate`) met before any packet carrying one of
            pcapgro's comments; after such a packet nothing is checked.
    """
    it = iter(events)
    for ev in it:
        if type(ev) is Packet:
            if carries_own(ev.meta):
                yield ev
                break
            if is_aggregate(ev):
                raise UnusableInput(NO_RECORDS)
        yield ev
    yield from it
