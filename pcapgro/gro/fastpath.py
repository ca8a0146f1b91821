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

__all__ = ["classify", "HDR"]

HDR = 94                   # bytes of each frame looked at: Ethernet, IPv4, TCP + 40 options
_COLS = np.arange(HDR, dtype=np.int64)
_OPT_COLS = np.arange(40, dtype=np.int64)
_FINAL = 0x2F              # URG | PSH | RST | SYN | FIN
_CWR = 0x80
_TAIL = bytes(128)


def _u16(H, c):
    return (H[:, c].astype(np.int64) << 8) | H[:, c + 1]


def _u32(H, c):
    return ((H[:, c].astype(np.int64) << 24) | (H[:, c + 1].astype(np.int64) << 16)
            | (H[:, c + 2].astype(np.int64) << 8) | H[:, c + 3])


def _in_place(batch):
    """For a batch read from one chunk (a PacketBatch of the pcap reader)
    whose frames all start at even offsets of it and end before its last
    16-bit word: ``(buf, off, lens, origs, linktype)``, the chunk and numpy
    arrays of frame offsets, captured and original lengths; else None (the
    frames are then copied end to end)."""
    buf = getattr(batch, "buf", None)
    if buf is None or len(batch.recs) != len(batch):
        return None
    r = np.array(batch.recs, dtype=np.int64)
    u8 = np.frombuffer(buf, dtype=np.uint8)
    at = r[:, None] + np.arange(8, 16, dtype=np.int64)
    lo = np.ascontiguousarray(u8[at]).view(batch.byteorder + "u4").astype(np.int64)
    lens = lo[:, 0]
    origs = lo[:, 1]
    off = r + batch.hl
    if ((off | lens) & 1).any() or int(off[-1] + lens[-1]) + 2 > len(buf):
        return None
    return buf, off, lens, origs, batch.linktype


def classify(batch, verify, sums=False):
    """Decide the fast-path cases of a batch of Packets.

    Args:
        batch:  list of Packet (no other events).
        verify: verify TCP checksums (the IPv4 header checksum is always
                verified).
        sums:   also compute the payload sums (``psum``).

    Returns:
        ``(prev, plen, pay, seqn, did, ok, n_verified, psum, runend)``,
        lists aligned with ``batch``:

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
        return _classify(buf, off, lens, lens, origs, lt, verify, sums)
    datas = [p.data for p in batch]
    lens = np.fromiter(map(len, datas), dtype=np.int64, count=n)
    if verify or sums:
        # frames end to end, odd ones padded to even length, so that every
        # IPv4 header (at frame offset 14) starts on a 16-bit word
        plen2 = lens + (lens & 1)
        buf = b"".join([d if not len(d) & 1 else d + b"\0" for d in datas] + [_TAIL])
    else:
        plen2 = lens
        buf = b"".join(datas + [_TAIL])
    off = np.zeros(n, dtype=np.int64)
    np.cumsum(plen2[:-1], out=off[1:])
    origs = np.array([p.orig_len for p in batch], dtype=np.int64)
    lt = np.array([p.linktype | (p.iface << 16) for p in batch], dtype=np.int64)
    return _classify(buf, off, lens, plen2, origs, lt, verify, sums)


def classify_chunk(chunk, off, cap, orig, verify, sums=False):
    """:func:`classify` for a :class:`pcapgro.capture.pcap.RecordChunk`
    (``off``, ``cap``, ``orig``: its numpy columns), in place; None when
    its frames do not all start at even offsets (then make Packets)."""
    if ((off | cap) & 1).any() or int(off[-1] + cap[-1]) + 2 > len(chunk.buf):
        return None
    return _classify(chunk.buf, off, cap, cap, orig, chunk.linktype, verify, sums)


def _classify(buf, off, lens, plen2, origs, lt, verify, sums):
    """classify over frames at ``off`` in ``buf`` (lengths ``lens``; each
    frame followed by ``plen2 - lens`` zero bytes, at an even offset when
    ``verify`` or ``sums``); ``lt``: link type | iface << 16 (array or
    one int for all)."""
    n = len(off)
    arr = np.frombuffer(buf, dtype=np.uint8)
    idx = off[:, None] + _COLS
    np.minimum(idx, len(arr) - 1, out=idx)
    H = arr[idx]                                   # (n, 94) header bytes

    tot = _u16(H, 16)
    word = _u32(H, 46)
    doff = H[:, 46] >> 4
    hl = doff.astype(np.int64) << 2
    pay = 34 + hl
    L = 14 + tot - pay
    frag = _u16(H, 20)
    fast = ((lt == 1) & (lens >= 54) & (H[:, 12] == 8) & (H[:, 13] == 0)
            & (H[:, 14] == 0x45) & (H[:, 23] == 6) & (tot + 14 == lens)
            & (lens == origs) & ((frag & 0xBFFF) == 0) & (doff >= 5) & (L >= 0))
    # IPv4 header checksum from the header columns
    hw = H[:, 14:34].astype(np.int64)
    fast &= ((hw[:, 0::2] << 8) + hw[:, 1::2]).sum(axis=1) % 0xFFFF == 0
    n_verified = 0
    psum = None
    if verify or sums:
        # TCP checksum: addresses + TCP header, 16-bit words [s+6, ps), and
        # payload, [ps, e)
        # little-endian words sum faster (no byte swap); a sum of swapped
        # words is the swapped sum, i.e. x 256 mod 0xFFFF
        words = np.frombuffer(buf, dtype="<u2", count=len(buf) >> 1)
        s = (off + 14) >> 1
        e = (off + plen2) >> 1
        a = np.minimum(s + 6, e)
        ps = np.clip((off + pay) >> 1, a, e)
        ix = np.empty(3 * n, dtype=np.intp)
        ix[0::3] = a
        ix[1::3] = ps
        ix[2::3] = e
        acc = np.uint32 if int(lens.max()) < 65536 else np.uint64
        red = np.add.reduceat(words, ix, dtype=acc)
        r2 = np.where(ps < e, red[1::3], 0).astype(np.int64) % 0xFFFF * 256 % 0xFFFF
        if verify:
            r = (np.where(a < ps, red[0::3], 0).astype(np.int64) % 0xFFFF * 256) + r2
            tcp_ok = (r + 6 + tot - 20) % 0xFFFF == 0
            n_verified = int(np.count_nonzero(fast & tcp_ok))
            fast &= tcp_ok
        if sums:
            psum = np.where(fast, r2, -1).tolist()

    # previous packet of the same flow (MAC header + addresses + ports)
    key = np.ascontiguousarray(np.concatenate((H[:, 0:14], H[:, 26:38]), axis=1))
    kv = key.view(np.dtype((np.void, 26))).ravel()
    _, inv = np.unique(kv, return_inverse=True)
    inv = inv.ravel()
    order = np.argsort(inv, kind="stable")
    same = inv[order[1:]] == inv[order[:-1]]
    prev = np.full(n, -1, dtype=np.int64)
    prev[order[1:][same]] = order[:-1][same]

    has = prev >= 0
    p = np.where(has, prev, 0)
    flags = H[:, 47]
    seq = _u32(H, 38)
    ipid = _u16(H, 18)
    did = (ipid - ipid[p]) & 0xFFFF
    seqn = (seq + L) & 0xFFFFFFFF
    opt_eq = ((H[:, 54:94] == H[p, 54:94]) | (_OPT_COLS >= (hl - 20)[:, None])).all(axis=1)
    cont = (has & fast & fast[p] & ((flags[p] & _FINAL) == 0) & ((flags & (_FINAL | _CWR)) == 0)
            & (((word ^ word[p]) & ~0x00090000) == 0)
            & (H[:, 42:46] == H[p, 42:46]).all(axis=1) & opt_eq
            & (H[:, 15] == H[p, 15]) & (H[:, 22] == H[p, 22])
            & ((frag & 0x4000) == (frag[p] & 0x4000))
            & (L > 0) & (L == L[p]) & (seq == seqn[p]) & (did <= 1))
    prev = np.where(cont, prev, -1)
    # runs of packets that each continue the one just before them
    cons = prev == np.arange(-1, n - 1)
    stops = np.append(np.flatnonzero(~cons), n)
    runend = stops[np.searchsorted(stops, np.arange(n), side="right")]
    if psum is None:
        psum = [None] * n
    elif not fast.all():
        psum = [None if x < 0 else x for x in psum]
    return (prev.tolist(), L.tolist(), pay.tolist(), seqn.tolist(), did.tolist(),
            fast.tolist(), n_verified, psum, runend.tolist())
