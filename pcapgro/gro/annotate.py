"""pcapng annotations of what GRO hands up: comments, flags, restore records.

The kernel has nothing like this; pcapgro marks each aggregate (comment
"pcapgro: GRO aggregate ...", EPB flag bit 11 "TCP segmentation offloaded")
and adds restore records (:mod:`pcapgro.restore`) so that ``split
--restore`` can give the input back.
"""

from .. import restore
from ..record import BLOCK_EPB, EPB_FLAG_TSO, Packet, PacketMeta

__all__ = ["with_comment", "passed", "single", "aggregate", "restore_record"]


def with_comment(meta, text):
    """A copy of ``meta`` (PacketMeta or None) with comment ``text`` added."""
    if meta is None:
        return PacketMeta(comments=[text])
    return PacketMeta(block=meta.block, comments=list(meta.comments) + [text],
                      flags=meta.flags, options=list(meta.options))


def passed(pkt, idx, overtakes):
    """Packet ``pkt`` (input index ``idx``) as it is passed up: when it
    ``overtakes`` held packets, or already carries pcapgro's comments (input
    merged before, so that the last record on a packet is always this
    merge's, :func:`pcapgro.restore.level`), with a restore record of its
    position; else ``pkt`` itself."""
    if not (overtakes or restore.carries_own(pkt.meta)):
        return pkt
    rec = f"{restore.TAG}i={idx} t={pkt.ts}" + restore.block_field(pkt.meta)
    return Packet(pkt.ts, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype,
                  with_comment(pkt.meta, rec))


def single(agg, t, annotated):
    """The head of ``agg``, held but merged with nothing, handed up at time
    ``t`` (ns): unchanged but for its time; ``annotated``: with a restore
    record of its position and original time."""
    pkt = agg.head.pkt
    if annotated:
        rec = f"{restore.TAG}i={agg.idxs[0]} t={pkt.ts}" + restore.block_field(pkt.meta)
        return Packet(t, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype,
                      with_comment(pkt.meta, rec))
    if pkt.ts == t:
        return pkt
    return Packet(t, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype, pkt.meta)


def aggregate(old, hdr, agg, proto, cut):
    """The PacketMeta of aggregate ``agg`` written with headers ``hdr``
    (bytes), its head's PacketMeta being ``old`` (or None): the head's
    comments, options and flags, plus the aggregate comment (``proto``:
    "TCP" / "UDP"), flag bit 11 and, unless the snaplen ``cut`` a segment
    (no exact record possible), the restore record.  The comment ends
    with the reason the aggregate was completed for (``agg.ended``)."""
    comments = list(old.comments) if old is not None else []
    kind = "fraglist " if agg.flist else ""
    # why it ended: a named rule (a Flush reason) or a poll end (poll_end,
    # budget, flush_timeout: timing-made, issue 21)
    comments.append(f"pcapgro: GRO aggregate ({kind}{proto}) of {agg.count} segments, "
                    f"gso_size {agg.mss}, ended by {agg.ended.value}")
    if not cut:
        comments.append(restore_record(hdr, agg, old.flags if old is not None else None))
    flags = (old.flags or 0) if old is not None else 0
    return PacketMeta(block=old.block if old is not None else BLOCK_EPB,
                      comments=comments, flags=flags | EPB_FLAG_TSO,
                      options=list(old.options) if old is not None else [])


def restore_record(hdr, agg, flags):
    """The restore record (str) of aggregate ``agg`` written with headers
    ``hdr``: :func:`pcapgro.restore.encode_rows` (a later segment's
    PacketMeta goes into the record's ``m=`` field; what the compiled core
    merged before it handed the aggregate over is in ``agg.rows0`` and
    ``agg.metas0``)."""
    pk, pays, idxs = agg.pkts, agg.pays, agg.idxs
    p0 = pk[0]
    t0, i0 = p0.ts, idxs[0]
    hdrs, dts, lens, dis = [], [], [], []
    metas = None                 # (row, PacketMeta) of segments that have some
    for m in range(1, len(pk)):
        e = pk[m]
        if type(e) is bytes:
            continue             # merged by the compiled loop: agg.rows0
        d = e.data
        o = pays[m]
        hdrs.append(d[:o])
        dts.append(e.ts - t0)
        lens.append(len(d) - o)
        dis.append(idxs[m] - i0)
        if e.meta is not None:
            if metas is None:
                metas = []
            metas.append((len(hdrs), e.meta))
    return restore.encode_rows(hdr, p0, pays[0], i0, flags, hdrs, dts, lens, dis, metas,
                               agg.rows0, agg.metas0)
