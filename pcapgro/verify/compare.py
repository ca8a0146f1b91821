"""The comparison of one window of a stream (TCP direction, UDP flow) of
IN with OUT's: bytes, coverage, arrival order, datagram boundaries,
problems OUT's packets carry; and of the other packets."""

from __future__ import annotations

import bisect

from .fields import CAT_L4CS, CAT_IPCS, CAT_MAL, CAT_EXPERT
from .rejected import _tcp_rejected_ahead, _udp_in_order
from .store import _first_diff

def compare_streams(v, proto, sa, sb, name, base):
    """Bytes, coverage and order of one window of a stream / flow.

    Args:
        v: the :class:`~.verdict.Verdict` problems are added to.
        proto: 'tcp' or 'udp'.
        sa, sb: the IN and OUT :class:`~.stream.Window` (None: the stream
            is missing from that side).
        name: the stream as the report names it.
        base: the sequence number relative positions count from (TCP).
    Returns: True when they carry the same bytes in the same order (as GRO
        may reorder them: counted in ``v.ahead``), else False.
    """
    if sb is None:
        if sa.store.st or sa.events:
            fr = sa.segs[0][0] if sa.segs else None
            v.add("missing", f"{proto.upper()} {'stream' if proto == 'tcp' else 'flow'} "
                  "missing from OUT", in_frame=fr, stream=name)
        return False
    if sa is None:
        if sb.store.st or sb.events:
            v.add("extra", "not in IN", out_frame=sb.segs[0][0] if sb.segs else None, stream=name)
        return False
    unit = "seq" if proto == "tcp" else "payload offset"

    def where(pos):
        if proto == "tcp":
            return f"{unit} {pos & 0xFFFFFFFF} (relative {pos - base})"
        return f"{unit} {pos}"
    d = _first_diff(sa.store, sb.store)
    if d is not None:
        _byte_difference(v, sa, sb, name, where, *d)
        return False
    return _same_order(v, proto, sa, sb, name, where)


def _byte_difference(v, sa, sb, name, where, pos, kind):
    """Report the first byte difference of a window (``kind`` 'differs',
    'missing' or 'extra' at stream position ``pos``), named by frame."""
    fin = sa.find_seg(pos)
    if kind == "differs":
        v.add("payload", f"payload byte differs at {where(pos)}",
              out_frame=sb.find_seg(pos), in_frame=fin, stream=name)
    elif kind == "missing":
        fo = sb.find_seg(pos, nominal=True)
        if fo is not None:
            v.add("missing", f"bytes from {where(pos)} not captured (packet truncated)",
                  out_frame=fo, in_frame=fin, stream=name)
            return
        # the OUT packet ending at the hole was cut short when tshark found
        # it broken (IP length beyond the frame: an expert error); else
        # packets are missing, named by the OUT frame that follows the hole
        broken = {fr for s, e, fr, cats in sb.flagged if CAT_EXPERT in cats or CAT_MAL in cats}
        cut = next((fr for fr, s, n, c in sb.segs if s < pos and s + c == pos
                    and fr in broken), None)
        if cut is not None:
            v.add("missing", f"bytes from {where(pos)} missing: packet cut short "
                  f"(IN frame {fin} carried them)", out_frame=cut, in_frame=fin,
                  stream=name)
        else:
            p = v.add("missing", f"bytes from {where(pos)} missing (IN frame {fin} "
                      "carried them)", out_frame=sb.find_seg(pos, after=True),
                      in_frame=fin, stream=name)
            if p is not None and p["out_frame"] is None:
                v.unnamed.append((name, pos, p))    # the next OUT frame is not read yet
    else:
        v.add("extra", f"bytes at {where(pos)} that IN does not have",
              out_frame=sb.find_seg(pos), in_frame=sa.find_seg(pos, nominal=True),
              stream=name)


def _same_order(v, proto, sa, sb, name, where):
    """True when new data arrived in the same order on both sides (or in
    the order GRO's rejected-packet reordering gives: counted in
    ``v.ahead``); else the first difference is reported and False."""
    oa, ob = sa.store.order, sb.store.order
    for k in range(max(len(oa), len(ob))):
        x = oa[k] if k < len(oa) else None
        y = ob[k] if k < len(ob) else None
        if x is not None and y is not None and x[0] == y[0] and x[1] == y[1]:
            continue
        moved, diff = _tcp_rejected_ahead(sa, sb, sb.ts_of) if proto == "tcp" else (0, None)
        if moved:
            v.ahead[proto] += moved         # the GRO model's reordering
            return True
        if diff is not None:                # named past the reordering GRO makes
            _order_difference(v, sa, sb, name, where, *diff)
            return False
        if x is not None and y is not None and x[0] == y[0] and y[1] < x[1] and k + 1 < len(ob):
            z = ob[k + 1]
            v.add("order", f"data at {where(z[0])} arrives before {where(y[1])} "
                  "(out of order compared with IN)", out_frame=z[2],
                  in_frame=sa.find_seg(z[0]), stream=name)
        elif y is not None:
            v.add("order", f"data at {where(y[0])} arrives in another order than in IN",
                  out_frame=y[2], in_frame=sa.find_seg(y[0]), stream=name)
        else:
            v.add("order", "data arrives in another order than in IN",
                  in_frame=x[2] if x else None, stream=name)
        return False
    return True


def _order_difference(v, sa, sb, name, where, early, ref, how):
    """Report an arrival-order difference found past GRO's accepted
    reordering (:func:`~.rejected._tcp_rejected_ahead`'s ``diff``), named
    by the OUT frame that carried the data at ``early``."""
    if how == "before":
        msg = f"data at {where(early)} arrives before {where(ref)} (out of order compared with IN)"
    elif how == "after":
        msg = (f"data at {where(early)} arrives after {where(ref)}, but GRO passes its packet "
               "at once (delayed compared with IN)")
    else:
        msg = f"data at {where(early)} arrives in another order than in IN"
    v.add("order", msg, out_frame=sb.find_seg(early), in_frame=sa.find_seg(early), stream=name)


def check_flags(sa, sb, v, name, csum, what):
    """OUT packets' problems (checksum, malformed, expert) must come from IN:
    allowed only on a packet IN had with the same problem (same sequence
    range: passed through unchanged).  Packets pcapgro made (segments,
    aggregates) must be clean -- except, with csum 'kernel', the TCP/UDP
    checksum of aggregates.  (A bad checksum anywhere in IN does not excuse
    a new packet: senders' captures have partial checksums on every
    super-frame, and the segments made from them must be valid.)"""
    idx, ranges = sa.flag_index() if sa is not None else ({}, set())
    for s, e, fr, cats in sb.flagged:
        for c in sorted(cats):
            if (s, e) in idx.get(c, ()):
                continue
            if c == CAT_L4CS and csum == "kernel" and e > s and (s, e) not in ranges:
                continue            # an aggregate carrying the kernel's checksum
            msg = {CAT_L4CS: f"bad {what} checksum", CAT_IPCS: "bad IPv4 header checksum",
                   CAT_MAL: "malformed packet", CAT_EXPERT: "expert error"}[c]
            v.add(c, msg + (" (IN had this packet without it)" if (s, e) in ranges
                            else " on a packet made from IN's data"),
                  out_frame=fr, stream=name)



def compare_udp_window(v, csum, sa, sb, name, content=True):
    """One window of a UDP flow: bytes (with a datagram GRO rejected put
    back where IN had it, :func:`~.rejected._udp_in_order`), datagram
    boundaries (each OUT datagram inside one IN datagram, or starting and
    ending on IN boundaries) unless not ``content``; checksum and
    malformed flags.  Returns True when a content difference was
    reported."""
    n0 = v.problems_total
    if not content:
        if sb is not None:
            check_flags(sa, sb, v, name, csum, "UDP")
        return False
    if sa is not None and sb is not None and sa.rej:
        back = _udp_in_order(sa, sb, sb.ts_of)
        if back is not None:
            sb = back[0]
            v.ahead["udp"] += back[1]       # the GRO model's reordering
    same = compare_streams(v, "udp", sa, sb, name, 0)
    if sa is None or sb is None:
        bad = v.problems_total > n0
        if sb is not None:
            check_flags(None, sb, v, name, csum, "UDP")
        return bad
    if same:
        starts = [s for fr, s, n, c in sa.segs]
        bounds = set(starts) | {s + n for fr, s, n, c in sa.segs}
        for fr, s, n, c in sb.segs:
            if s in bounds and s + n in bounds:
                continue
            i = bisect.bisect_right(starts, s) - 1
            if i >= 0 and s + n <= sa.segs[i][1] + sa.segs[i][2]:
                continue
            v.add("boundary", f"datagram at payload offset {s} ({n} bytes) crosses a datagram "
                  "boundary of IN", out_frame=fr, in_frame=sa.segs[i][0] if i >= 0 else None,
                  stream=name)
            break
    bad = v.problems_total > n0
    check_flags(sa, sb, v, name, csum, "UDP")
    return bad


def compare_tcp_window(v, csum, sa, sb, name, base, content=True):
    """One window of a TCP stream direction: bytes, coverage, arrival order
    (:func:`compare_streams`, unless not ``content``) and the flags OUT's
    packets carry.  Returns True when a content difference was reported."""
    n0 = v.problems_total
    if content:
        compare_streams(v, "tcp", sa, sb, name, base)
    bad = v.problems_total > n0
    if sb is not None:
        check_flags(sa, sb, v, name, csum, "TCP")
    return bad


def compare_events(v, fa, fb, name):
    """SYN/FIN/RST positions of a whole TCP stream (the first difference)."""
    ea, eb = fa.events, fb.events
    if set(ea) != set(eb):
        base = fa.syn_seq if fa.syn_seq is not None else 0
        for ev in sorted(set(ea) ^ set(eb), key=lambda e: (e[1], e[0])):
            if ev in ea:
                v.add("event", f"{ev[0]} at seq {ev[1] & 0xFFFFFFFF} (relative {ev[1] - base}) "
                      "missing from OUT", in_frame=ea[ev], stream=name)
            else:
                v.add("event", f"{ev[0]} at seq {ev[1] & 0xFFFFFFFF} (relative {ev[1] - base}) "
                      "not in IN", out_frame=eb[ev], stream=name)
            break


def compare_acks(v, fa, fb, name, final=False):
    """Pure ACKs of a TCP stream in step: the ACKs both sides have so far
    are compared and dropped; with ``final`` what one side has more is a
    difference.  Returns False once a difference was reported (the
    stream's ACKs are then not compared any further)."""
    qa, qb = fa.acks, fb.acks
    n = min(len(qa), len(qb))
    i = next((i for i in range(n) if qa[i][0] != qb[i][0]), n)
    if i < n or (final and len(qa) != len(qb)):
        if i < len(qb):
            v.add("ack", f"pure ACK {qb[i][0]} differs from IN's "
                  + (f"{qa[i][0]}" if i < len(qa) else "(IN has no more)"),
                  out_frame=qb[i][1], in_frame=qa[i][1] if i < len(qa) else None, stream=name)
        else:
            v.add("ack", f"pure ACK {qa[i][0]} missing from OUT",
                  in_frame=qa[i][1], out_frame=fb.last_ack_frame, stream=name)
        del qa[:], qb[:]
        return False
    del qa[:n], qb[:n]
    return True


def compare_other(v, a, b, final=False):
    """The other packets (not TCP/UDP) in step, pair by pair (frame MD5 and
    length, then new problems); the first missing, extra or different one
    is reported and ends the comparison (returns False)."""
    oa, ob = a.other, b.other
    while oa and ob:
        x, y = oa.popleft(), ob.popleft()
        if x[1] != y[1] or x[2] != y[2]:
            v.add("other", "packet (not TCP/UDP) differs from IN's", out_frame=y[0], in_frame=x[0])
            return False
        for c in sorted(y[3] - x[3]):
            v.add(c, f"{c} on a packet (not TCP/UDP) that IN had without it",
                  out_frame=y[0], in_frame=x[0])
    if final and ob:
        v.add("extra", "packet (not TCP/UDP) that IN does not have", out_frame=ob[0][0])
        return False
    if final and oa:
        v.add("missing", "packet (not TCP/UDP) missing from OUT", in_frame=oa[0][0])
        return False
    return True
