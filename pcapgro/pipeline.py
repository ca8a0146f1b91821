"""Reader -> (optional transform) -> writer.

A *transform* is any callable taking an iterator of events
(:mod:`pcapgro.record`: Section, Interface, Packet, Block) and returning an
iterator of events -- e.g. ``GROEngine(config).process``.  It must pass
Section/Interface/Block events through in order (the writer needs them to
lay out sections and interfaces) and may merge, split or annotate Packets
(``Packet.meta`` comments / ``EPB_FLAG_TSO`` are written as EPB options).
When the reader raises DamagedInput inside the transform's loop, a
transform that holds packets should emit them (``try/except DamagedInput:
flush; raise``) so that everything before the damage is written.

Without a transform the pipeline moves whole batches (lists of events)
from the reader to the writer; classic pcap to classic pcap of the same byte
order and resolution goes faster still: record headers are walked and
checked and the records copied verbatim a chunk at a time (no Packet
objects).

A transform that is the ``process`` method of an object with
``transform_batches`` (:class:`pcapgro.gro.GROEngine`) is run list in, list
out instead: the reader's batches go in whole (from classic pcap, as
``RecordChunk`` objects: records not yet made into Packets, see
``PcapReader.batches(lazy=True)``; from pcapng, runs of EPBs as
``EpbChunk`` objects, ``PcapngReader.batches(lazy=True)``) and each list
that comes out goes to
``write_batch``.  Same events out; no per-event generator step.  A writer
with ``takes_parts`` (classic pcap) gets aggregates as lists of parts
(``GROEngine.parts_out``): their payloads are never copied in Python.
"""

from __future__ import annotations

import gc

from .errors import DamagedInput
from .record import HostRecords

__all__ = ["run", "counts"]

BATCH = 1024   # events handed to the writer at once (transform path)
# HostRecords of at least this many records go to the writer at once, with
# the events before them (the compiled placement gives one per reader chunk:
# 1024 of those would be ~4 GiB)
BATCH_RECORDS = 64
GC_GEN0 = 50_000   # gen-0 GC threshold while a batch transform runs


def counts(reader, writer):
    """The statistics dict of a finished (or stopped) run:
    ``{"packets_in", "bytes_in", "packets_out", "bytes_out"}`` -- packets
    and captured bytes (sum of ``len(Packet.data)``) read and written."""
    return {"packets_in": reader.packets, "bytes_in": reader.packet_bytes,
            "packets_out": writer.packets, "bytes_out": writer.packet_bytes}


def _batch_transform(transform):
    """The list-in, list-out form of ``transform``, or None: a bound
    ``process`` method whose object also has ``transform_batches`` (as
    :class:`pcapgro.gro.GROEngine` has), or a callable with a
    ``transform_batches`` attribute."""
    tb = getattr(transform, "transform_batches", None)
    if tb is None and getattr(transform, "__name__", None) == "process":
        tb = getattr(getattr(transform, "__self__", None), "transform_batches", None)
    return tb


def _records_out(eng, reader, writer):
    """Packets given back by a transform with ``records_out``
    (:class:`pcapgro.restore.Restorer`) may go to a writer that
    ``takes_host_records`` as records the compiled restore lays out, and
    be taken from the reader's buffer (its ``epb_hook``: no Packet made).
    True when the reader's hook was set."""
    if getattr(writer, "takes_host_records", False) and hasattr(eng, "records_out"):
        eng.records_out = True
        hook = eng.reader_hook()
        if hook is not None and hasattr(reader, "epb_hook"):
            reader.epb_hook = hook
            return True
    return False


def _events_through(reader, writer, transform, progress):
    """run() for a transform of event iterators: its events go to the
    writer in lists of BATCH (a HostRecords of BATCH_RECORDS or more at
    once, with what is before it)."""
    wb = writer.write_batch
    batch = []
    app = batch.append
    try:
        for ev in transform(iter(reader)):
            app(ev)
            if len(batch) >= BATCH or type(ev) is HostRecords and ev.n >= BATCH_RECORDS:
                wb(batch)
                batch.clear()
                if progress is not None:
                    progress(reader.bytes_read)
    except DamagedInput:
        # everything before the damage goes out before the error does
        if batch:
            wb(batch)
        raise
    if batch:
        wb(batch)


def _batches_through(reader, writer, tb, progress):
    """run() for a transform that takes and gives lists (``tb``:
    GROEngine.transform_batches): a classic pcap or pcapng reader's chunks
    go in lazily (RecordChunks, EpbChunks), and the engine is told what the writer takes
    as it is (aggregates as parts; records or EPBs the compiled core lays
    out)."""
    wb = writer.write_batch
    lazy = getattr(reader, "lazy_batches", False)
    eng = getattr(tb, "__self__", None)
    if getattr(writer, "takes_parts", False) and hasattr(eng, "parts_out"):
        # aggregates go to the writer as their parts, not joined
        eng.parts_out = True
    if hasattr(eng, "raw_out") and getattr(writer, "accepts_raw", None) is not None \
            and writer.accepts_raw(reader):
        # records in the input's format may go out as they are laid out
        # by the compiled GRO loop (pcapgro.gro.cfast)
        eng.raw_out = True
    elif hasattr(eng, "ng_out") and getattr(writer, "accepts_blocks", None) is not None:
        # or as the EPBs it lays out for pcapng output
        eng.ng_out = writer.accepts_blocks(reader)
    elif hasattr(eng, "raw_layout") and getattr(writer, "record_layout", None) is not None \
            and getattr(reader, "format", None) == "pcapng":
        # or as the classic pcap records it lays out as the writer says
        eng.raw_layout = writer.record_layout
    # the cyclic GC: GRO makes and drops many small objects per chunk
    # but no reference cycles, so its scans of them (a collection per
    # 700 allocations: ~8% of the time) are spaced out here
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], GC_GEN0), *thresholds[1:])
    try:
        for out in tb(reader.batches(lazy=True) if lazy else reader.batches()):
            if out:
                wb(out)
            if progress is not None:
                progress(reader.bytes_read)
    finally:
        gc.set_threshold(*thresholds)


def run(reader, writer, transform=None, progress=None):
    """Copy every event of ``reader`` through ``transform`` to ``writer``.

    Args:
        reader:    a capture reader (``batches()``, ``__iter__``,
                   ``bytes_read``, ``packets``, ``packet_bytes``).
        writer:    a capture writer (``write``, ``write_batch``,
                   ``packets``, ``packet_bytes``).  Not closed here.
        transform: None (pass-through) or callable(iterator of events) ->
                   iterator of events.  When it is the ``process`` method
                   of an object with ``transform_batches`` (GROEngine), that
                   is used instead: reader batches in, lists out.
        progress:  None or callable(bytes_read: int), called now and then
                   with the total input bytes read so far.
    Returns:
        :func:`counts` dict.
    Raises:
        whatever the reader raises (DamagedInput after the events before the
        damage have been handed to the writer; UnusableInput), the writer
        (UnusableInput), or the transform.
    """
    if transform is None and getattr(reader, "raw_batches", None) is not None \
            and getattr(writer, "accepts_raw", None) is not None and writer.accepts_raw(reader):
        # classic pcap to the same kind of classic pcap: records are copied
        # verbatim a chunk at a time (headers walked, lengths checked)
        writer.write_batch(reader.header_events())
        wr = writer.write_raw
        for records, n, mx in reader.raw_batches():
            wr(records, n, mx)
            if progress is not None:
                progress(reader.bytes_read)
    elif transform is None:
        wb = writer.write_batch
        if progress is None:
            for batch in reader.batches():
                wb(batch)
        else:
            for batch in reader.batches():
                wb(batch)
                progress(reader.bytes_read)
    elif _batch_transform(transform) is not None:
        _batches_through(reader, writer, _batch_transform(transform), progress)
    else:
        thresholds = gc.get_threshold()
        if _records_out(getattr(transform, "__self__", None), reader, writer):
            # the compiled walk makes a few tuples per packet, no cycles:
            # collections spaced out as for GRO (~8% of split --restore)
            gc.set_threshold(max(thresholds[0], GC_GEN0), *thresholds[1:])
        try:
            _events_through(reader, writer, transform, progress)
        finally:
            gc.set_threshold(*thresholds)
    if progress is not None:
        progress(reader.bytes_read)
    return counts(reader, writer)
