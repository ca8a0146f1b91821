"""The one reordering GRO makes: a packet GRO rejects before flow matching
(bad checksum, IPv4 options, a header cut short; UDP also checksum 0 or a
length that is not the bytes present) is passed at once, ahead of the
aggregate its flow holds.  These functions decide, for one window of a
stream, whether OUT's order differs from IN's only that way."""

from __future__ import annotations

import bisect

from .store import _union
from .stream import Window

def _cut_rejected(order, rej):
    """Split a TCP stream's arrival order into rejected and other data.

    Args:
        order: ``_Store.order``: [start, end, frame] of new data, arrival
               order (absolute sequence numbers, end exclusive).
        rej:   sorted disjoint [start, end] ranges (:func:`_union`) of the
               data of packets GRO rejects before matching.
    Returns:
        (kept, pieces): kept = [[start, end]] of the other data in arrival
        order, contiguous runs merged; pieces = [[start, end, before]] of
        the rejected data in arrival order, ``before`` = bytes of kept data
        that arrived before it (pieces of one range of ``rej`` arriving back
        to back merged; not those of two ranges, even adjacent ones: of two
        rejected packets in a row, the first may overtake the held
        aggregate and the second not).
    """
    kept, pieces = [], []
    n = 0
    last_i = -1
    starts = [r[0] for r in rej]
    for s, e, _fr in order:
        pos = s
        i = max(bisect.bisect_right(starts, s) - 1, 0)
        while pos < e:
            while i < len(rej) and rej[i][1] <= pos:
                i += 1
            if i < len(rej) and rej[i][0] <= pos:
                ce = min(e, rej[i][1])
                if pieces and pieces[-1][1] == pos and pieces[-1][2] == n and last_i == i:
                    pieces[-1][1] = ce
                else:
                    pieces.append([pos, ce, n])
                last_i = i
            else:
                ce = e if i == len(rej) else min(e, rej[i][0])
                if kept and kept[-1][1] == pos:
                    kept[-1][1] = ce
                else:
                    kept.append([pos, ce])
                n += ce - pos
            pos = ce
    return kept, pieces


def _held_run(segs, at, skip, ts_of):
    """Indexes into ``segs`` of the OUT packets of the aggregate a rejected
    packet (``segs[at]``) overtook: the first later packet of the stream
    that carries data and is not in ``skip`` (a frame set: other rejected
    packets), and those right after it stamped with the same time (the
    segments ``merge --gso`` cuts an aggregate into leave together).
    [] when there is none."""
    run, t0 = [], None
    for x in range(at + 1, len(segs)):
        fr, t, n, c = segs[x]
        if fr in skip or not n:
            continue
        if run and ts_of.get(fr) != t0:
            break
        if not run:
            t0 = ts_of.get(fr)
        run.append(x)
    return run


def _tcp_rejected_ahead(sa, sb, ts_of):
    """Whether a TCP stream's OUT order differs from IN's only as GRO
    reorders: a packet GRO rejects before matching (IN frames in
    ``sa.rej``: bad checksum, IPv4 options, a header cut short) is passed
    at once and overtakes its flow's held aggregate, so its data may arrive
    in OUT ahead of data that came before it in IN -- but only of data of
    that one aggregate (:func:`_held_run`).

    Args:
        sa, sb: the IN and OUT :class:`~.stream.Window` (same payload bytes).
        ts_of:  OUT's {frame: timestamp in ns}.
    Returns:
        (moved, diff): ``moved`` the number of rejected IN packets that
        arrived ahead (>= 1) when the orders differ only that way, else 0.
        With 0, ``diff`` is the first difference GRO's reordering does not
        explain, the moves it does explain left out (a real reordering
        after an accepted one is named by the data that really moved):
        (early, ref, how) with ``how`` 'before' (data at sequence position
        ``early`` arrives before ``ref``), 'after' (the rejected packet's
        data at ``early`` arrives after ``ref``: GRO never holds one) or
        'other' (data at ``early`` arrives in another order; ``ref``
        None); None when there is no rejected data to leave out (the
        orders are then compared as they are).
    """
    ranges = [(s, s + c) for fr, s, n, c in sa.segs if c and fr in sa.rej]
    if not ranges:
        return 0, None
    rej = _union(ranges, adjacent=False)     # one range per rejected packet
    ka, pa = _cut_rejected(sa.store.order, rej)
    kb, pb = _cut_rejected(sb.store.order, rej)
    diff = _first_run_diff(ka, kb) or _first_run_diff([p[:2] for p in pa], [p[:2] for p in pb])
    if diff is not None:
        return 0, diff
    cum = [0]
    for s, e in ka:
        cum.append(cum[-1] + e - s)

    def kept_at(c):
        """The sequence position of kept byte ``c`` (arrival order)."""
        k = bisect.bisect_right(cum, c) - 1
        return ka[k][0] + c - cum[k]
    segs = sb.segs
    rstarts = sorted(r[0] for r in ranges)
    starts = [r[0] for r in rej]
    first = {}                      # start -> index of the first OUT segment there
    skip = set()                    # OUT frames carrying only rejected data
    for j, (fr, s, n, c) in enumerate(segs):
        if c:
            first.setdefault(s, j)
            i = bisect.bisect_right(starts, s) - 1
            if i >= 0 and s + c <= rej[i][1]:
                skip.add(fr)
    moved = 0
    for (s, e, pin), (_, _, pout) in zip(pa, pb):
        if pout == pin:
            continue
        if pout > pin:              # delayed: GRO never holds a rejected packet
            return 0, (s, kept_at(pin), "after")
        # the data it overtook: kept bytes [pout, pin), as sequence ranges
        i = bisect.bisect_right(cum, pout) - 1
        j = bisect.bisect_left(cum, pin) - 1
        over = [(ka[k][0] + (pout - cum[k] if k == i else 0),
                 ka[k][0] + (pin - cum[k]) if k == j else ka[k][1]) for k in range(i, j + 1)]
        # the OUT packet that carried the piece, and the aggregate after it
        at = first.get(s)
        if at is None:
            at = next((x for x, (fr, t, n, c) in enumerate(segs) if t <= s < t + c), None)
        if at is None:
            return 0, (s, None, "other")
        held = _union((segs[x][1], segs[x][1] + segs[x][3]) for x in _held_run(segs, at, skip, ts_of))
        hs = [h[0] for h in held]
        for lo, hi in over:
            h = bisect.bisect_right(hs, lo) - 1
            if h < 0 or hi > held[h][1]:
                return 0, (s, over[0][0], "before")     # more than one aggregate overtaken
        moved += max(bisect.bisect_left(rstarts, e) - bisect.bisect_left(rstarts, s), 1)
    return moved, None


def _first_run_diff(a, b):
    """The first difference of two arrival orders ``a`` (IN) and ``b``
    (OUT) of new data, [start, end, ...] runs: (early, ref, how) as
    :func:`_tcp_rejected_ahead` returns it, or None when they are equal."""
    for k in range(max(len(a), len(b))):
        x = a[k] if k < len(a) else None
        y = b[k] if k < len(b) else None
        if x is not None and y is not None and x[0] == y[0] and x[1] == y[1]:
            continue
        if x is not None and y is not None and x[0] == y[0] and y[1] < x[1] and k + 1 < len(b):
            return b[k + 1][0], y[1], "before"
        if y is not None:
            return y[0], None, "other"
        return x[0], None, "other"
    return None


def _udp_in_order(sa, sb, ts_of):
    """A UDP flow's OUT datagrams put back in IN's order, when they differ
    from it only as GRO reorders: a datagram GRO rejects before matching
    (IN and OUT frames in ``.rej``: bad or zero checksum, UDP length not the
    bytes present, IPv4 options, a header cut short) is passed at once and
    overtakes its flow's held aggregate (:func:`_held_run`), which may go
    on merging datagrams that came after it in IN (UDP has no sequence
    numbers to stop it).

    UDP payload offsets are counted in arrival order, so such a datagram
    would shift every offset after it; here it is moved back to where IN
    had it (the aggregate it overtook cut in two there) and the flow is
    rebuilt, so that bytes, boundaries and checksum flags are compared in
    IN's offsets.

    Args:
        sa, sb: the IN and OUT :class:`~.stream.Window` of one UDP flow.
        ts_of:  OUT's {frame: timestamp in ns}.
    Returns:
        (rebuilt OUT _Stream, number of datagrams moved back (>= 1)), or
        None when nothing moved or OUT differs otherwise (compared as is).
    """
    def split(st):
        kept, rej, pos = [], [], 0
        for x, (fr, a, n, c) in enumerate(st.segs):
            if fr in st.rej:
                rej.append((pos, n, x))
            else:
                kept.append((pos, x))
                pos += n
        return kept, rej, pos
    _, ra, total_a = split(sa)
    kb, rb, total_b = split(sb)
    if (not ra or len(ra) != len(rb) or total_a != total_b
            or any(x[1] != y[1] for x, y in zip(ra, rb))
            or all(x[0] == y[0] for x, y in zip(ra, rb))):
        return None
    segs = sb.segs
    moved = 0
    for (pin, n, _), (pout, _, x) in zip(ra, rb):
        if pout == pin:
            continue
        if pout > pin:
            return None             # delayed: GRO never holds a rejected datagram
        if pin > pout + sum(segs[y][2] for y in _held_run(segs, x, sb.rej, ts_of)):
            return None             # it overtook more than one held aggregate
        moved += 1
    # OUT's pieces (index into segs, offset, length) in IN's order
    order = []
    k = 0
    for pos, x in kb:
        n = segs[x][2]
        off = 0
        while k < len(ra) and pos + off <= ra[k][0] < pos + n:
            cut = ra[k][0] - pos
            if cut > off:
                order.append((x, off, cut - off))
                off = cut
            order.append((rb[k][2], 0, segs[rb[k][2]][2]))
            k += 1
        if n > off or not n:
            order.append((x, off, n - off))
    order += [(r[2], 0, segs[r[2]][2]) for r in rb[k:]]
    cats = {fr: c for st_, e_, fr, c in sb.flagged}
    out = Window(sb.key, sb.gen)
    for x, off, n in order:
        fr, a, _, c = segs[x]
        data = sb.store.get(a + off, a + min(c, off + n)) if c > off else b""
        pos = out.udp_end
        out.udp_end += n
        out.segs.append((fr, pos, n, len(data)))
        out.store.add(pos, data, fr)
        if fr in cats:
            out.flagged.append((pos, pos + n, fr, cats[fr]))
    out.npkts = sb.npkts
    out.rej = sb.rej
    return out, moved

