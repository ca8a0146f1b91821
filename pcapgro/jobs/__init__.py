"""The library calls: :func:`merge`, :func:`split`, :func:`verify`,
:func:`calibrate`.

Each does a whole job, as ``pcapgro merge|split|verify`` does it, and
returns the statistics dict the command prints and writes with
``--stats`` (a :class:`Report`)::

    import pcapgro
    st = pcapgro.merge("wire.pcap", "gro.pcapng", fraglist=True, udp="gro")
    print(st["packets_in"], "->", st["packets_out"], st["gro"]["flush_reasons"])
    st = pcapgro.split("gro.pcapng", "back.pcap", restore=True)
    assert pcapgro.verify("wire.pcap", "gro.pcapng")["result"] == "faithful"

Options are keyword arguments named as the command-line flags
(``--gro-max-size`` -> ``gro_max_size``, ``--local-port`` -> ``local_ports``;
the tables in :mod:`pcapgro.jobs.options`).  Errors are raised
(:mod:`pcapgro.errors`), never turned into exits.
"""

from __future__ import annotations

import os

from ..errors import DamagedInput, OptionError, UnusableInput
from . import files
from .options import (CALIBRATE_OPTIONS, MERGE_OPTIONS, SPLIT_OPTIONS, TUNNEL_OPTIONS,
                      check_merge, check_split,
                      gro_config, gso_config, resolve)
from .run import Job, Report

__all__ = ["merge", "split", "verify", "calibrate", "plan_merge", "plan_split", "Report", "Job"]


def _split_tunnel_ports():
    """``{"vxlan_ports": (...), "geneve_ports": (...)}``: the UDP ports on
    which split cuts super-frames inside VXLAN and Geneve
    (:data:`pcapgro.gso.tunnel.UDP_TUNNEL_PORTS`)."""
    from ..gso.tunnel import UDP_TUNNEL_PORTS
    return {f"{kind}_ports": tuple(p for p, k in UDP_TUNNEL_PORTS.items() if k == kind)
            for kind in ("vxlan", "geneve")}


def __getattr__(name):
    """``SPLIT_VXLAN_PORTS`` and ``SPLIT_GENEVE_PORTS`` (tuples of UDP
    ports, from :data:`pcapgro.gso.tunnel.UDP_TUNNEL_PORTS`), made when
    first asked for: importing :mod:`pcapgro.gso` for them was ~7 ms of
    every command's start-up (merge without ``--gso`` needs none of it)."""
    if name in ("SPLIT_VXLAN_PORTS", "SPLIT_GENEVE_PORTS"):
        return _split_tunnel_ports()[name[len("SPLIT_"):].lower()]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def merge(src, dst, *, out_format=None, verify=False, progress=None, note=None, **options):
    """Run IN through Linux GRO (``pcapgro merge``) and write OUT.

    Args:
        src:        IN: a path, ``'-'`` (standard input), an open binary
                    stream, or a :class:`pcapgro.live.LiveCapture`.
        dst:        OUT: a path (written to a temp file beside it and
                    renamed when complete), ``'-'`` or an open binary stream.
        out_format: 'pcap', 'pcapng' or None (OUT's extension, else IN's).
        verify:     then check OUT against IN through tshark (IN and OUT
                    files); the verdict is under ``"verify"``.
        progress:   None or callable(bytes of IN read so far: int).
        note:       None or callable(str): told about what the output
                    format cannot hold (pcap output loses the annotations).
        **options:  merge's options (:data:`~pcapgro.jobs.options.
                    MERGE_OPTIONS`): ``no_gro``, ``csum='kernel'``,
                    ``fraglist``, ``udp='gro'``, ``local_ports=(443,)``,
                    ``gso``, ``egress_mtu``, ...
    Returns: a :class:`Report` (dict): ``packets_in``, ``bytes_in``,
        ``packets_out``, ``bytes_out`` (captured bytes), ``gro`` (and
        ``forward`` with ``gso``, ``verify`` with ``verify``, ``live`` with
        live input: ``captured``, ``dropped_kernel``, ...); ``.status`` 4
        when a live capture lost packets.
    Raises: OptionError (options that do not go together, OUT naming IN),
        UnusableInput, DamagedInput (``e.report``), OutputClosed
        (``e.report``), TypeError (an unknown option).
    """
    return plan_merge(src, dst, out_format=out_format, verify=verify, note=note,
                      **options).run(progress)


def split(src, dst, *, out_format=None, verify=False, progress=None, **options):
    """Cut IN's super-frames as Linux GSO/TSO does (``pcapgro split``), or
    give back merge's originals (``restore=True``), and write OUT.

    Args: as :func:`merge`; ``**options``: split's (:data:`~pcapgro.jobs.
        options.SPLIT_OPTIONS`): ``mss``, ``mtu``, ``gso_size``,
        ``fixed_id``, ``restore``.
    Returns: a :class:`Report`: the packet counts and ``gso`` (or
        ``restore``).
    Raises: as :func:`merge`.
    """
    return plan_split(src, dst, out_format=out_format, verify=verify, **options).run(progress)


def verify(in_path, out_path, csum="valid", progress=None, **tunnels):
    """Check through tshark that OUT carries exactly what IN carried
    (``pcapgro verify``).

    Args:
        in_path, out_path: capture files (not '-': tshark reads them).
        csum: 'valid' or 'kernel' (OUT's aggregates carry the kernel's
              checksums).
        progress: None or callable(bytes_read: int), called as IN is read.
        **tunnels: ``vxlan_ports``, ``geneve_ports`` (:data:`~pcapgro.jobs.
              options.TUNNEL_OPTIONS`, as merge takes them): UDP ports whose
              VXLAN / Geneve frames are compared by their inner flow.
    Returns: a :class:`Report`: the verdict's dict (``result``
        'faithful' or 'differ', ``problems``, ...); ``.verdict`` the
        :class:`pcapgro.verify.Verdict`, ``.status`` 0 or 1.
    Raises: OptionError ('-'), UnusableInput (no tshark, unusable IN/OUT).
    """
    for label, p in (("IN", in_path), ("OUT", out_path)):
        if p == "-" or files.is_stream(p):
            raise OptionError(f"verify needs {label} to be a file (tshark reads it; "
                              "'-' is not supported)")
    values, _ = resolve(TUNNEL_OPTIONS, tunnels)
    v = _verify_module().verify(in_path, out_path, csum=csum, progress=progress,
                                **_tunnel_ports(values))
    return Report(v.to_dict(), verdict=v)


def calibrate(wire, received, *, max_merges=None, **options):
    """Fit merge's NAPI timing to a receiver's capture (``pcapgro
    calibrate``): :func:`pcapgro.calibrate.calibrate` on two capture files.

    Args:
        wire:       the wire capture (what the receiver's GRO got): a path,
                    '-' (standard input) or an open binary stream; it is
                    read whole into memory.
        received:   the receiver's capture after its GRO: the same (not
                    both '-').
        max_merges: bound on the merges the fit runs (None: the default,
                    :data:`pcapgro.calibrate.MAX_MERGES`); at least 1.
        **options:  merge's GRO options kept fixed (:data:`~pcapgro.jobs.
                    options.CALIBRATE_OPTIONS`): ``udp='gro'``,
                    ``fraglist``, ``csum``, ...
    Returns: a :class:`Report`: ``result`` ('exact', 'not_exact', or
        'not_gro' with ``offending``), ``options``, ``command``,
        ``agreement``, ``default_agreement``, ``sensitivity``,
        ``unexplained``; ``.lines`` what the command prints, ``.status`` 0
        fitted, 1 not a GRO result; ``.calibration`` the
        :class:`pcapgro.calibrate.Calibration`.
    Raises: UnusableInput (unreadable, not a capture, or damaged part-way),
        OptionError, TypeError (an unknown option).
    """
    from ..calibrate import MAX_MERGES, calibrate as fit
    resolve(CALIBRATE_OPTIONS, options)        # bad options before reading
    if max_merges is not None and (isinstance(max_merges, bool) or not isinstance(max_merges, int)
                                   or max_merges < 1):
        raise OptionError(f"max_merges must be a whole number of at least 1, not {max_merges!r}")
    if wire == "-" and received == "-":
        raise OptionError("WIRE and RECEIVED cannot both be standard input ('-')")
    c = fit(*(_whole_capture(label, p) for label, p in (("WIRE", wire), ("RECEIVED", received))),
            max_merges=MAX_MERGES if max_merges is None else max_merges, **options)
    shown = os.fspath(wire) if isinstance(wire, (str, os.PathLike)) else "WIRE"
    r = Report(c.to_dict(shown, "OUT"), c.lines(shown, "OUT"))
    r.status = c.status
    r.calibration = c
    return r


def _whole_capture(label, path):
    """The Packets of calibrate's capture ``label`` ('WIRE'/'RECEIVED') at
    ``path`` (a path, '-' or an open binary stream, read whole into
    memory).  Errors name ``label``: UnusableInput for a capture that
    cannot be opened, is empty or no capture, and for a damaged one (the
    fit needs it whole)."""
    from ..agreement import read_packets
    from ..capture import open_reader_file
    from ..record import Packet
    stream = hasattr(path, "read")
    if not stream and not isinstance(path, (str, os.PathLike)):
        raise OptionError(f"calibrate needs {label} to be a path, '-' or a binary stream")
    if not stream and not os.fspath(path):        # worded as verify's
        raise UnusableInput(f"cannot open {label} '': empty file name")
    name = getattr(path, "name", "stream") if stream else os.fspath(path)
    try:
        if not stream:
            return read_packets(path)
        r = open_reader_file(path, str(name), close_on_error=False)
        return [ev for ev in r if type(ev) is Packet]
    except DamagedInput as e:
        raise UnusableInput(f"{label} {name}: {e} (the fit needs it whole)") from None
    except OptionError:
        raise
    except UnusableInput as e:
        msg = str(e)
        named = msg.startswith(f"{name}:") or msg.startswith("stdin:")
        raise UnusableInput(f"{label} {msg}" if named else f"{label}: {msg}") from None


def _tunnel_ports(values):
    """verify's tunnel keywords from checked option ``values``."""
    return {o.name: tuple(values[o.name]) for o in TUNNEL_OPTIONS}


def _verify_module():
    from .. import verify as vf     # the module (pcapgro/__init__ makes it callable)
    return vf


def plan_merge(src, dst, *, out_format=None, verify=False, note=None, explicit=False,
               **options):
    """The checked :class:`Job` of :func:`merge` (nothing opened yet).

    ``explicit``: every option in ``options`` was set by the user (the
    command line: each counts, even at its default value)."""
    values, given = resolve(MERGE_OPTIONS, options, explicit)
    check_merge(values, given)
    csum = "valid" if values["no_gro"] else values["csum"]
    after = _verify_after(src, dst, csum, _tunnel_ports(values)) if verify else None
    return Job(src, dst, _merge_build(values, note), out_format, after)


def plan_split(src, dst, *, out_format=None, verify=False, explicit=False, **options):
    """The checked :class:`Job` of :func:`split` (nothing opened yet)."""
    values, given = resolve(SPLIT_OPTIONS, options, explicit)
    check_split(values, given)
    # split cuts super-frames inside VXLAN and Geneve on their standard
    # ports (pcapgro.gso.tunnel): verify looks inside the same ones
    after = _verify_after(src, dst, tunnels=_split_tunnel_ports()) if verify else None
    return Job(src, dst, _split_build(values, src), out_format, after)


def _merge_build(values, note):
    """Builder of merge's transform for :class:`Job` (per output format)."""
    def build(fmt):
        if values["no_gro"]:
            return None, dict, list
        if fmt == "pcap" and note is not None and not values["gso"]:
            note("note: pcap holds no comments or restore records (-F pcapng keeps them)")
        cfg = gro_config(values, annotate=fmt == "pcapng")
        if values["gso"]:
            from ..forward import Forwarder
            fwd = Forwarder(cfg, egress_mtu=values["egress_mtu"], router=not values["bridge"])
            return fwd.process, fwd.stats.to_dict, fwd.stats.table
        from ..gro import GROEngine
        engine = GROEngine(cfg)
        return engine.process, lambda: {"gro": engine.stats.to_dict()}, engine.stats.table
    return build


def _split_build(values, src=None):
    """Builder of split's transform for :class:`Job`; ``src``: IN (a classic
    pcap cannot hold restore records: aggregates in it are refused with
    ``--restore``)."""
    def build(fmt):
        if values["restore"]:
            from ..gso.records import classic_pcap, require_records
            from ..restore import Restorer
            r = Restorer()
            proc = ((lambda evs: r.process(require_records(evs)))
                    if isinstance(src, (str, os.PathLike)) and classic_pcap(src)
                    else r.process)
            return proc, lambda: {"restore": dict(r.stats)}, lambda: restore_table(r.stats)
        from ..gso import GSOSplitter
        # the TSO flag is cleared on every segment, whatever the output format
        sp = GSOSplitter(gso_config(values, annotate=True))
        return sp.process, lambda: {"gso": sp.stats.to_dict()}, sp.stats.table
    return build


def restore_table(st):
    """The summary lines of ``split --restore`` (``st``: Restorer.stats)."""
    from ..text import count, fit, num
    lines = [f"restore: {num(st['restored'])} aggregates given back as "
             f"{count(st['segments'], 'packet')}, {num(st['passed'])} passed"]
    if st["unrecorded"]:
        lines.append(f"  {count(st['unrecorded'], 'aggregate')} "
                     f"{'carries' if st['unrecorded'] == 1 else 'carry'} no restore record (cut "
                     "by a snaplen: merge keeps only their contiguous captured bytes) and "
                     "stay as they are")
    if st.get("unfit"):
        lines.append(f"  {count(st['unfit'], 'restore record')} "
                     f"{'does' if st['unfit'] == 1 else 'do'} not fit their packet (the "
                     "capture was edited after merge: cut, chopped or changed) and "
                     "those packets stay as they are")
    return fit(lines)


def _verify_after(src, dst, csum="valid", tunnels=None):
    """The ``after`` of a job with ``verify=True``: refuses live input, '-',
    streams, FIFOs and a missing tshark before anything is written."""
    vf = _verify_module()
    if files.is_live(src):
        raise OptionError("--verify needs IN as a file, not live input")
    for label, p in (("IN", src), ("OUT", dst)):
        if p == "-" or files.is_stream(p):
            raise OptionError(f"--verify needs {label} to be a file: tshark reads IN and "
                              f"OUT after OUT is written ('-' cannot be read again)")
        what = vf.not_a_file(p)
        if what:
            raise OptionError(f"--verify needs {label} to be a regular file: tshark reads "
                              f"IN and OUT after OUT is written ({p} is {what})")
    vf.tshark_path()
    return lambda: vf.verify(src, dst, csum=csum, **(tunnels or {}))
