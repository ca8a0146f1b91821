"""The events a capture is made of, as every pcapgro stage passes them along.

A reader turns a file into a stream of these events, the GRO engine and the
GSO splitter consume and produce them, and a writer turns them back into a
file.  Classic pcap input yields one :class:`Section`, one :class:`Interface`
and then :class:`Packet` objects; pcapng input yields them in block order
(plus :class:`Block` for blocks that are kept verbatim).

Timestamps are integers in nanoseconds since the Unix epoch (``if_tsoffset``
already applied); no floats anywhere on the path.
"""

from __future__ import annotations

__all__ = ["Packet", "PacketMeta", "GSOInfo", "Interface", "Section", "Block", "RawRecords",
           "RawBlocks", "HostRecords", "EPB_FLAG_TSO", "BLOCK_EPB", "BLOCK_SPB", "BLOCK_PB"]

# pcapng EPB flags word bit 11: "TCP segmentation offloaded" (a received
# packet made of several link-layer packets, or a TX packet before
# segmentation).  draft-ietf-opsawg-pcapng, epb_flags.
EPB_FLAG_TSO = 1 << 11

BLOCK_EPB = 6   # Enhanced Packet Block (also what classic pcap records map to)
BLOCK_SPB = 3   # Simple Packet Block (no timestamp, interface 0)
BLOCK_PB = 2    # obsolete Packet Block


class Packet:
    """One captured packet.

    Attributes:
        ts:       timestamp, int nanoseconds since the epoch (an SPB, which has
                  none: the time of the packet before it in its section).
        data:     the captured bytes (``len(data)`` is the captured length).
        orig_len: original (wire) length in bytes, ``>= len(data)``.
        iface:    interface index within the current section (pcap: 0).
        linktype: LINKTYPE_* value of that interface (e.g. 1 = EN10MB).
        meta:     ``None`` (the common case: nothing but the above) or a
                  :class:`PacketMeta` with comments, flags and other options.
        gso:      ``None`` (a packet as received or read) or the
                  :class:`GSOInfo` of an aggregate the GRO engine completed
                  (never read from or written to a file: a stage after GRO,
                  such as forwarding, reads it).
    """

    __slots__ = ("ts", "data", "orig_len", "iface", "linktype", "meta", "gso")

    def __init__(self, ts, data, orig_len, iface=0, linktype=1, meta=None, gso=None):
        self.ts = ts
        self.data = data
        self.orig_len = orig_len
        self.iface = iface
        self.linktype = linktype
        self.meta = meta
        self.gso = gso

    def __repr__(self):
        return (f"Packet(ts={self.ts}, caplen={len(self.data)}, "
                f"orig_len={self.orig_len}, iface={self.iface}, "
                f"linktype={self.linktype}, meta={self.meta!r})")


class GSOInfo:
    """What GRO completion leaves in an aggregate's ``skb_shinfo()``: the
    GSO fields a forwarder's egress GSO segments it by (include/linux/
    skbuff.h; set by tcp_gro_complete / udp_gro_complete and their
    fraglist branches, net/ipv4/tcp_offload.c, net/ipv4/udp_offload.c).

    Attributes:
        kind:     'tcp' (SKB_GSO_TCPV4 / SKB_GSO_TCPV6) or 'udp'
                  (SKB_GSO_UDP_L4).
        fraglist: True when SKB_GSO_FRAGLIST is set: the packets were
                  chained, not merged (rx-gro-list), and skb_segment_list
                  gives them back.
        gso_size: bytes, the payload of every segment but the last (the
                  first segment's payload length: ``gso_size``).
        gso_segs: segments in the aggregate (NAPI_GRO_CB(skb)->count,
                  ``gso_segs``), >= 2.
    """

    __slots__ = ("kind", "fraglist", "gso_size", "gso_segs")

    def __init__(self, kind, fraglist, gso_size, gso_segs):
        self.kind = kind
        self.fraglist = fraglist
        self.gso_size = gso_size
        self.gso_segs = gso_segs

    def __repr__(self):
        return (f"GSOInfo(kind={self.kind!r}, fraglist={self.fraglist}, "
                f"gso_size={self.gso_size}, gso_segs={self.gso_segs})")

    def __eq__(self, other):
        return type(other) is GSOInfo and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None


class PacketMeta:
    """What a pcapng packet block carries besides timestamp and bytes.

    Attributes:
        block:    BLOCK_EPB, BLOCK_SPB or BLOCK_PB (how it was stored).
        comments: list of str (``opt_comment``, may repeat), in order.
        flags:    int ``epb_flags`` word, or None when absent.
        options:  list of ``(code, value_bytes)`` for every other option
                  that is to be kept (copyable), in order, values raw in
                  the section's byte order.
    """

    __slots__ = ("block", "comments", "flags", "options")

    def __init__(self, block=BLOCK_EPB, comments=None, flags=None, options=None):
        self.block = block
        self.comments = comments if comments is not None else []
        self.flags = flags
        self.options = options if options is not None else []

    def __repr__(self):
        return (f"PacketMeta(block={self.block}, comments={self.comments!r}, "
                f"flags={self.flags!r}, options={self.options!r})")


class Interface:
    """One capture interface (a pcapng IDB, or the pcap file header).

    Attributes:
        linktype:  LINKTYPE_* value.
        snaplen:   bytes, as the input declared it (0 = unlimited).
        tsresol:   the ``if_tsresol`` byte (6 = µs, 9 = ns; bit 7 set means
                   a power of two), or the pcap file's resolution (6 or 9).
        tsoffset:  ``if_tsoffset`` in seconds (int), 0 when absent.
        options:   list of ``(code, value_bytes)`` of the IDB's other options
                   (if_name, if_description, ...), raw, in order.
    """

    __slots__ = ("linktype", "snaplen", "tsresol", "tsoffset", "options")

    def __init__(self, linktype, snaplen=262144, tsresol=6, tsoffset=0, options=None):
        self.linktype = linktype
        self.snaplen = snaplen
        self.tsresol = tsresol
        self.tsoffset = tsoffset
        self.options = options if options is not None else []

    def __repr__(self):
        return (f"Interface(linktype={self.linktype}, snaplen={self.snaplen}, "
                f"tsresol={self.tsresol}, tsoffset={self.tsoffset})")


class Section:
    """Start of a section (pcapng SHB, or the start of a classic pcap file).

    Interfaces are numbered anew from 0 after every Section.

    Attributes:
        byteorder: '<' or '>' as the input had it.
        options:   list of ``(code, value_bytes)`` of the SHB (shb_hardware,
                   comments, ...), raw, in order.
        major, minor: version numbers of the SHB (1, 0).
    """

    __slots__ = ("byteorder", "options", "major", "minor")

    def __init__(self, byteorder="<", options=None, major=1, minor=0):
        self.byteorder = byteorder
        self.options = options if options is not None else []
        self.major = major
        self.minor = minor

    def __repr__(self):
        return f"Section(byteorder={self.byteorder!r}, options={len(self.options)})"


class Block:
    """A pcapng block kept verbatim (NRB, ISB, copyable custom block, ...).

    Attributes:
        type: block type (int).
        body: the block body bytes (between the length fields), in the
              section's byte order.
    """

    __slots__ = ("type", "body")

    def __init__(self, type, body):
        self.type = type
        self.body = body

    def __repr__(self):
        return f"Block(type=0x{self.type:08x}, len={len(self.body)})"


class RawRecords:
    """Classic pcap records already laid out (16-byte header + frame each),
    in the byte order and timestamp resolution of the input they came from:
    what the compiled GRO fast path hands up (:mod:`pcapgro.gro.cfast`).
    Only a :class:`pcapgro.capture.pcap.PcapWriter` that ``accepts_raw``
    that input takes them (``GROEngine.raw_out``).

    Attributes:
        data:   the records (bytes-like: a bytearray from the loop).
        n:      how many records.
        maxcap: the largest captured length among them, bytes.
        ts:     the latest time written up to and including them (the GRO
                engine's ``last_out_ts``), int ns.
    """

    __slots__ = ("data", "n", "maxcap", "ts")

    def __init__(self, data, n, maxcap, ts):
        self.data = data
        self.n = n
        self.maxcap = maxcap
        self.ts = ts

    def __repr__(self):
        return f"RawRecords(n={self.n}, bytes={len(self.data)})"


class RawBlocks:
    """Enhanced Packet Blocks already laid out, on interface ``iface`` of
    the section being written, in the byte order and timestamp units the
    writer agreed to (:meth:`pcapgro.capture.pcapng.PcapngWriter.accepts_blocks`):
    what the compiled GRO loop hands up for pcapng output, options
    (comments, flags) included (:mod:`pcapgro.gro.cfast`).

    Attributes:
        data:   the blocks (bytes-like).
        n:      how many EPBs.
        maxcap: the largest captured length among them, bytes.
        nbytes: their captured bytes in all (packet data, no headers).
        ts:     the latest time written up to and including them, int ns.
        iface:  their interface (index in the section).
        layout: None (a classic pcap input's: the section accepts_blocks
                agreed), or ``(byteorder, unit, off)``: the section's byte
                order and the interface's timestamp units (ticks ``(ns -
                off) // unit``; unit -k: a binary resolution 2**-k s, ticks
                as pcapng.ns_to_ts gives them) they were laid out for
                (pcapng input).
    """

    __slots__ = ("data", "n", "maxcap", "nbytes", "ts", "iface", "layout")

    def __init__(self, data, n, maxcap, nbytes, ts, iface=0, layout=None):
        self.data = data
        self.n = n
        self.maxcap = maxcap
        self.nbytes = nbytes
        self.ts = ts
        self.iface = iface
        self.layout = layout

    def __repr__(self):
        return f"RawBlocks(n={self.n}, bytes={len(self.data)})"


class HostRecords:
    """Classic pcap records already laid out (16-byte header + frame each)
    in the host's byte order with nanosecond timestamp fractions: what the
    compiled restore of ``split --restore`` gives back
    (:class:`pcapgro.restore.Restorer` with ``records_out``).  Only a
    writer with ``takes_host_records`` (PcapWriter) takes them; it turns
    the headers into its own byte order and resolution in place.

    Attributes:
        data:   the records (a writable buffer: a bytearray or a view of one;
                or a list of such buffers, each holding whole records, written
                one after the other without being joined).
        n:      how many records.
        maxcap: the largest captured length among them, bytes.
    """

    __slots__ = ("data", "n", "maxcap")

    def __init__(self, data, n, maxcap):
        self.data = data
        self.n = n
        self.maxcap = maxcap

    def __repr__(self):
        return f"HostRecords(n={self.n}, bytes={len(self.data)})"
