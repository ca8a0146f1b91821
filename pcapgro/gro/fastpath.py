"""The fast path: Ethernet / IPv4 / TCP decided for a whole batch at once.

The kernel inlines its GRO fast path because call depth costs cycles; in
CPython per-packet statements cost far more, so pcapgro goes further: for a
batch of packets the headers of the common case (EN10MB, no VLAN tag, IPv4
without options, TCP) are parsed, checksum-verified and compared with the
previous packet of the same flow in numpy, column by column.  What is left
per packet in Python is the part that depends on engine state (is the
aggregate still held, the size limit, the IPv4 ID mode).

:func:`classify` only ever says "this segment continues the aggregate its
flow's previous packet is in, if that one is still held"; every other packet
(a new flow, a flush, a PSH, a short segment, IPv6, VLAN, ...) takes the
general path in :mod:`pcapgro.gro.engine`, which is the reference.  The
equivalence of the two is tested (tests/test_gro_fastpath.py).

The conditions are those of tcp_gro_receive / inet_gro_receive (Linux 6.18)
rewritten pairwise: a segment may follow the flow's previous segment p when
it is a valid, unflagged (no L3 flush) IPv4/TCP packet; p carried no
URG/PSH/RST/SYN/FIN (else p's aggregate was completed); the new one carries
none of those nor CWR; TCP bytes 12..15 (data offset, flags, window) equal
but for FIN/PSH, ack_seq and every option byte equal; TOS, TTL and DF
equal; the payload length equals p's (then it equals gso_size, as p was the
head or merged at full size) and is > 0; seq = p.seq + p.len; and the IPv4
ID differs from p's by 0 or 1 (the engine checks which mode the aggregate
is in).  By induction over the aggregate these equal the kernel's
comparisons with the head.
"""

import numpy as np

from ..checksum import range_sums

__all__ = ["classify", "classify_chunk", "Classified", "Columns", "HDR"]

HDR = 94                   # bytes of each frame looked at: Ethernet, IPv4, TCP + 40 options
_COLS = np.arange(96, dtype=np.int64)   # HDR rounded up to 64-bit words
_FINAL = 0x2F              # URG | PSH | RST | SYN | FIN
_CWR = 0x80
_TAIL = bytes(8)           # after joined frames: the buffer is never empty


def _in_place(batch):
    """For a batch read from one chunk (a PacketBatch of the pcap reader):
    ``(buf, off, lens, origs, linktype)``, the chunk and numpy arrays of
    frame offsets, captured and original lengths; else None (the frames
    are then copied end to end)."""
    buf = getattr(batch, "buf", None)
    if buf is None or len(batch.recs) != len(batch):
        return None
    r = np.array(batch.recs, dtype=np.int64)
    u8 = np.frombuffer(buf, dtype=np.uint8)
    at = r[:, None] + np.arange(8, 16, dtype=np.int64)
    lo = np.ascontiguousarray(u8[at]).view(batch.byteorder + "u4").astype(np.int64)
    lens = lo[:, 0]
    origs = lo[:, 1]
    return buf, r + batch.hl, lens, origs, batch.linktype


def classify(batch, verify, sums=False):
    """Decide the fast-path cases of a batch of Packets.

    Args:
        batch:  list of Packet (no other events).
        verify: verify TCP checksums (the IPv4 header checksum is always
                verified).
        sums:   also compute the payload sums (``psum``).

    Returns:
        a :class:`Classified`: lists aligned with ``batch`` (``arrs``: a
        :class:`Columns` with some of them as numpy arrays):

        * ``prev[i]``: index in the batch of the flow's previous packet when
          packet i may continue that packet's aggregate (see module doc),
          else -1.
        * ``plen[i]``: TCP payload length (bytes); ``pay[i]``: payload
          offset; ``seqn[i]``: seq + length mod 2**32; ``did[i]``: IPv4 ID
          minus the previous packet's, mod 2**16.
        * ``ok[i]``: True when packet i is a plain Ethernet/IPv4/TCP packet
          whose checksums were verified good (or, verify off, whose IPv4
          header checksum is good) and that fills its frame exactly; the
          general path then need not verify it again.
        * ``n_verified``: how many TCP checksums were verified good.
        * ``psum[i]``: for an ``ok`` packet (and ``sums``), the
          one's-complement sum mod 0xFFFF of its payload bytes (an odd
          last byte padded with zero), else None.
        * ``runend[i]``: the end (exclusive) of the run of packets from i on
          in which every packet after i has ``prev`` = its index - 1.
    """
    n = len(batch)
    chunk = _in_place(batch)
    if chunk is not None:
        buf, off, lens, origs, lt = chunk
        return _classify(buf, off, lens, origs, lt, verify, sums)
    datas = [p.data for p in batch]
    lens = np.fromiter(map(len, datas), dtype=np.int64, count=n)
    buf = b"".join(datas + [_TAIL])
    off = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1], out=off[1:])
    origs = np.array([p.orig_len for p in batch], dtype=np.int64)
    lt = np.array([p.linktype | (p.iface << 16) for p in batch], dtype=np.int64)
    return _classify(buf, off, lens, origs, lt, verify, sums)


def classify_chunk(chunk, off, cap, orig, verify, sums=False, lazy=False):
    """:func:`classify` for a :class:`pcapgro.capture.pcap.RecordChunk`
    (``off``, ``cap``, ``orig``: its numpy columns), in place: frames
    may start at any offset of the chunk, have any length.  ``lazy``: the
    ``pay``, ``ok`` and ``runend`` lists are None until :func:`fill_lazy`
    (the chunk planner needs only the arrays).  Returns a
    :class:`Classified`."""
    return _classify(chunk.buf, off, cap, orig, chunk.linktype, verify, sums, lazy)


_K = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
               0xD6E8FEB86659FD93], dtype=np.uint64)
# the flow key's bytes in the little-endian 64-bit words 0, 1, 3 and 4 of a
# row: MAC header 0..13, IPv4 addresses and ports 26..37
_KEY_MASKS = np.array([0xFFFFFFFFFFFFFFFF, 0x0000FFFFFFFFFFFF, 0xFFFFFFFFFFFF0000,
                       0x0000FFFFFFFFFFFF], dtype=np.uint64)[:, None]


def _ack_opt_masks():
    """(16, 7) uint64: per TCP data offset, the little-endian masks of
    words 5..11 (bytes 40..95) of a header row selecting ack_seq (42..45)
    and the option bytes (54 .. 34 + 4 * doff)."""
    m = np.zeros((16, 56), dtype=np.uint8)
    m[:, 2:6] = 0xFF                                   # bytes 42..45
    for doff in range(16):
        m[doff, 14:max(14, 34 + 4 * doff - 40)] = 0xFF  # bytes 54 .. 34+hl
    return m.view(np.uint64)


_ACK_OPT_MASKS = _ack_opt_masks()
# per TCP data offset: which of the 30 words after byte 34 are TCP header
_TCP_WORD_MASKS = (np.arange(30)[None, :] < 2 * np.arange(16)[:, None]).astype(np.uint16)


def _flow_order(H):
    """Group the rows of header bytes ``H`` ((n, 96) uint8, C order) by
    flow key (MAC header and IPv4 addresses and ports, see _KEY_MASKS).

    Returns ``(order, same, inv)``: a permutation of the rows putting each
    flow's rows together (in row order within a flow), ``same[k]``: rows
    ``order[k]`` and ``order[k + 1]`` are of one flow, and ``inv``: a flow
    id per row (0..flows-1).  Rows are sorted by a 64-bit hash of the key
    words; that rows said to be of one flow have equal keys is checked, and
    on a hash collision the key words themselves are sorted (exact)."""
    W = H.view(np.uint64)
    c = np.stack((W[:, 0], W[:, 1], W[:, 3], W[:, 4])) & _KEY_MASKS   # (4, n)
    h = (c * _K[:, None]).sum(axis=0, dtype=np.uint64)
    h ^= h >> np.uint64(31)
    order = np.argsort(h, kind="stable")
    hs = h[order]
    same = hs[1:] == hs[:-1]
    cs = c[:, order]
    eq = (cs[:, 1:] == cs[:, :-1]).all(axis=0)
    if (same & ~eq).any():
        order = np.lexsort(c[::-1])
        cs = c[:, order]
        same = (cs[:, 1:] == cs[:, :-1]).all(axis=0)
    gid = np.zeros(len(h), dtype=np.int64)
    np.cumsum(~same, out=gid[1:])
    inv = np.empty(len(h), dtype=np.int64)
    inv[order] = gid
    return order, same, inv


def _derived_psums(H, hl, tot):
    """Payload sums taken from the TCP checksum fields (checksums not
    verified, so not summed from the bytes): for a segment whose checksum is
    valid, pseudo-header + TCP header (field included) + payload sums to 0
    mod 0xFFFF, so the payload's sum is minus the rest (RFC 1624's
    incremental arithmetic).  -1 where the field holds the pseudo-header
    seed (a sender's CHECKSUM_PARTIAL: the payload is then summed from its
    bytes).  Mirrors :func:`pcapgro.gro.tcp.derived_psum` (the general path's)."""
    pseudo, tcp = _pseudo_tcp_sums(H, hl, tot)
    d = (-(pseudo + tcp)) % 0xFFFF
    sd = pseudo % 0xFFFF
    sd[sd == 0] = 0xFFFF                                   # fold(): pseudo > 0
    return np.where(H.view(">u2")[:, 25] == sd, -1, d)


def _pseudo_tcp_sums(H, hl, tot):
    """Per header row: the TCP pseudo-header sum (IPv4 addresses, protocol
    6, TCP length ``tot - 20``; unreduced) and the TCP header's sum
    (checksum field included; hl bytes from byte 34), mod 0xFFFF."""
    # little-endian words of the TCP header (17 .. 17 + hl/2 of the row);
    # x 256 mod 0xFFFF gives the big-endian sum
    tcp = (H.view("<u2")[:, 17:47] * _TCP_WORD_MASKS[hl >> 2]).sum(axis=1, dtype=np.int64)
    tcp = tcp % 0xFFFF * 256 % 0xFFFF
    pseudo = H.view(">u2")[:, 13:17].sum(axis=1, dtype=np.int64) + 6 + tot - 20
    return pseudo, tcp


def _classify(buf, off, lens, origs, lt, verify, sums, lazy=False):
    """classify over frames at ``off`` in ``buf`` (lengths ``lens``, any
    offsets and lengths); ``lt``: link type | iface << 16 (array or one
    int for all); ``lazy``: see :func:`classify_chunk`."""
    n = len(off)
    arr = np.frombuffer(buf, dtype=np.uint8)
    # (n, 96) header bytes (HDR and 2 more); past the buffer's end: its
    # last byte
    H = np.take(arr, off[:, None] + _COLS, mode="clip")

    B = H.view(">u2")                  # big-endian 16-bit words of the rows
    tot = B[:, 8].astype(np.int64)
    word = (B[:, 23].astype(np.int64) << 16) | B[:, 24]
    doff = H[:, 46] >> 4
    hl = doff.astype(np.int64) << 2
    pay = 34 + hl
    L = 14 + tot - pay
    frag = B[:, 10]
    fast = ((lt == 1) & (lens >= 54) & (B[:, 6] == 0x0800)
            & (H[:, 14] == 0x45) & (H[:, 23] == 6) & (tot + 14 == lens)
            & (lens == origs) & ((frag & 0xBFFF) == 0) & (doff >= 5) & (L >= 0))
    # IPv4 header checksum from the header columns (a sum of byte-swapped
    # words is 256 x the sum, so zero mod 0xFFFF either way)
    fast &= H.view("<u2")[:, 7:17].sum(axis=1, dtype=np.int64) % 0xFFFF == 0
    n_verified = 0
    psum = None
    if verify:
        # TCP checksum: pseudo-header and TCP header from the header rows,
        # the payload summed in place (range_sums: one pass over the chunk)
        s0 = off + np.clip(pay, 0, lens)
        r2 = range_sums(buf, s0, np.maximum(off + np.minimum(lens, 14 + tot), s0))
        pseudo, tcp = _pseudo_tcp_sums(H, hl, tot)
        tcp_ok = (pseudo + tcp + r2) % 0xFFFF == 0
        n_verified = int(np.count_nonzero(fast & tcp_ok))
        fast &= tcp_ok
        if sums:
            psum = np.where(fast, r2, -1).tolist()
    elif sums:
        psum = np.where(fast, _derived_psums(H, hl, tot), -1).tolist()

    # previous packet of the same flow (MAC header + addresses + ports)
    order, same, inv = _flow_order(H)
    prev = np.full(n, -1, dtype=np.int64)
    prev[order[1:][same]] = order[:-1][same]

    has = prev >= 0
    p = np.where(has, prev, 0)
    flags = H[:, 47]
    seq = (B[:, 19].astype(np.int64) << 16) | B[:, 20]
    ipid = B[:, 9].astype(np.int64)
    did = (ipid - ipid[p]) & 0xFFFF
    seqn = (seq + L) & 0xFFFFFFFF
    # ack_seq (bytes 42..45) and the option bytes (54 .. 34 + hl) equal the
    # previous packet's: 64-bit words 5..11, masked by data offset
    W = H.view(np.uint64)[:, 5:12]
    opt_eq = (((W ^ W[p]) & _ACK_OPT_MASKS[doff]) == 0).all(axis=1)
    cont = (has & fast & fast[p] & ((flags[p] & _FINAL) == 0) & ((flags & (_FINAL | _CWR)) == 0)
            & (((word ^ word[p]) & ~0x00090000) == 0)
            & opt_eq
            & (H[:, 15] == H[p, 15]) & (H[:, 22] == H[p, 22])
            & ((frag & 0x4000) == (frag[p] & 0x4000))
            & (L > 0) & (L == L[p]) & (seq == seqn[p]) & (did <= 1))
    prev = np.where(cont, prev, -1)
    if psum is None:
        psum = [None] * n
    elif -1 in psum:
        psum = [None if x < 0 else x for x in psum]
    arrs = Columns()
    arrs.inv = inv
    arrs.prev = prev
    arrs.fast = fast
    arrs.pay = pay
    arrs.did = did
    c = Classified()
    c.prev, c.plen, c.seqn, c.did = prev.tolist(), L.tolist(), seqn.tolist(), did.tolist()
    c.n_verified, c.psum, c.arrs, c.owner = n_verified, psum, arrs, [None] * n
    c.pay = c.ok = c.runend = None
    if not lazy:
        fill_lazy(c)
    return c


def _runend(prev):
    """runend (see :func:`classify`) from the numpy ``prev`` column."""
    n = len(prev)
    # runs of packets that each continue the one just before them
    cons = prev == np.arange(-1, n - 1)
    stops = np.append(np.flatnonzero(~cons), n)
    return stops[np.searchsorted(stops, np.arange(n), side="right")].tolist()


def fill_lazy(cls):
    """Fill in what :func:`classify_chunk` with ``lazy`` left out (the
    ``pay``, ``ok`` and ``runend`` lists of Classified ``cls``), in place."""
    if cls.pay is None:
        arrs = cls.arrs
        cls.pay = arrs.pay.tolist()
        cls.ok = arrs.fast.tolist()
        cls.runend = _runend(arrs.prev)


class Classified:
    """The per-packet fast-path state of a batch (what NAPI_GRO_CB would
    hold for each, decided at once): lists aligned with the batch.

    Attributes:
        prev:   index of the flow's previous packet when packet i may
                continue that packet's aggregate (see the module doc), else -1.
        plen:   TCP payload length, bytes.
        pay:    payload offset in the frame, bytes.
        seqn:   seq + payload length, mod 2**32.
        did:    IPv4 ID minus the previous packet's, mod 2**16.
        ok:     True for a plain Ethernet/IPv4/TCP packet whose checksums
                were verified good (or, verify off, whose IPv4 header
                checksum is good) and that fills its frame exactly.
        n_verified: int, TCP checksums verified good.
        psum:   for an ``ok`` packet (when sums were asked for), the
                one's-complement sum mod 0xFFFF of its payload, else None.
        runend: end (exclusive) of the run of packets from i on in which
                each packet after i has ``prev`` = its index - 1.
        arrs:   :class:`Columns`, some of these as numpy arrays.
        owner:  the Agg packet i was merged into or held as (set by the
                engine as it goes), else None.
    """

    __slots__ = ("prev", "plen", "pay", "seqn", "did", "ok", "n_verified", "psum",
                 "runend", "arrs", "owner")


class Columns:
    """Some of :func:`classify`'s results as numpy arrays (int64 / bool,
    one element per packet): ``inv`` flow id (packets with equal MAC
    header, addresses and ports share one; meaningful where ``fast``),
    ``prev``, ``fast`` (the ``ok`` list), ``pay``, ``did``."""

    __slots__ = ("inv", "prev", "fast", "pay", "did")
