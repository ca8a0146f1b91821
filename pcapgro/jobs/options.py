"""merge's and split's options, each declared once.

One :class:`Option` per option: its command-line flag, help, type and
default, and the :class:`~pcapgro.gro.GROConfig` / :class:`~pcapgro.gso.
GSOConfig` field it sets.  The CLI makes its click options from these
tables (:func:`pcapgro.cli.table_options`); :func:`pcapgro.merge` and
:func:`pcapgro.split` take the same names as keyword arguments, check
their values with the same types and build the engines' configurations
from them.  Adding an option is one entry here (plus the engine field it
sets).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import click

from ..errors import OptionError

__all__ = ["Option", "MERGE_OPTIONS", "SPLIT_OPTIONS", "TUNNEL_OPTIONS", "CALIBRATE_OPTIONS",
           "resolve", "gro_config",
           "gso_config", "check_merge", "check_split"]


@dataclass(frozen=True)
class Option:
    """One option of a job.

    Attributes:
        name:     keyword of :func:`pcapgro.merge` / :func:`pcapgro.split`
                  and click's parameter name (``gro_max_size``).
        flag:     the command-line flag (``--gro-max-size``).
        help:     the ``--help`` text.
        type:     a click type checking (and converting) the value, both
                  on the command line and from the library; None = a flag
                  (bool).
        default:  value when not given.
        metavar:  shown in ``--help`` (``BYTES``), or None.
        multiple: repeatable (the value is a tuple).
        field:    the engine configuration field it sets, or None (a job
                  option: ``--no-gro``, ``--gso``, ``--restore`` ...).
        to_field: value -> field value (e.g. ``not``), or None (as is).
        gro:      an option of the GRO engine or forwarding: refused with
                  ``--no-gro``, which turns GRO off.
    """

    name: str
    flag: str
    help: str
    type: Any = None
    default: Any = None
    metavar: Optional[str] = None
    multiple: bool = False
    field: Optional[str] = None
    to_field: Optional[Callable[[Any], Any]] = None
    gro: bool = True

    @property
    def is_flag(self):
        return self.type is None

    def check(self, value):
        """``value`` checked and converted as click converts the flag's
        argument.  Raises OptionError (the flag and why)."""
        if self.multiple:
            if isinstance(value, (str, bytes, int)):
                value = (value,)
            return tuple(self._one(v) for v in value)
        return self._one(value)

    def _one(self, value):
        if self.is_flag:
            if not isinstance(value, bool):
                raise OptionError(f"{self.flag}: {value!r} is not True or False")
            return value
        if value is None and self.default is None:
            return None
        if isinstance(self.type, click.Choice) and not isinstance(value, str):
            value = str(value)
        try:
            return self.type.convert(value, None, None)
        except click.BadParameter as e:
            raise OptionError(f"{self.flag}: {e.message}") from None

    def field_value(self, value):
        """What the configuration field gets for ``value``."""
        return self.to_field(value) if self.to_field is not None else value


def _not(v):
    return not v


# merge's and verify's: the UDP ports that carry VXLAN / Geneve
TUNNEL_OPTIONS = (
    Option("vxlan_ports", "--vxlan-port", type=click.IntRange(0, 65535), default=(),
           multiple=True, metavar="PORT", field="vxlan_ports", to_field=frozenset,
           help="The receiver has a VXLAN socket on UDP PORT (4789; repeatable): "
                "VXLAN frames to it merge by their inner flow (verify: their inner flow "
                "is compared).  Off by default."),
    Option("geneve_ports", "--geneve-port", type=click.IntRange(0, 65535), default=(),
           multiple=True, metavar="PORT", field="geneve_ports", to_field=frozenset,
           help="The receiver has a Geneve socket on UDP PORT (6081; repeatable)."),
)

MERGE_OPTIONS = (
    Option("no_gro", "--no-gro", gro=False,
           help="GRO off (as 'ethtool -K dev gro off'): a pure pass-through."),
    Option("no_verify_csum", "--no-verify-csum", field="verify_csum", to_field=_not,
           help="Do not verify TCP/UDP checksums (the kernel verifies them; a bad one never "
                "merges): trust them, so an aggregate's TCP checksum is computed from its "
                "segments' fields, not their bytes."),
    Option("csum", "--csum", type=click.Choice(["valid", "kernel"]), default="valid",
           field="csum",
           help="Checksum written on aggregates: a valid one, or what the kernel leaves "
                "(pseudo-header seed; fraglist: the first packet's)."),
    Option("gro_max_size", "--gro-max-size", type=click.IntRange(1, 524280), default=65536,
           metavar="BYTES", field="gro_max_size",
           help="gro_max_size: aggregates stay below it; above 65536 is BIG TCP "
                "(IPv4 total length 0, IPv6 Hop-by-Hop jumbo)."),
    Option("gro_flush_timeout", "--gro-flush-timeout", type=click.IntRange(0), default=0,
           metavar="NS", field="gro_flush_timeout",
           help="gro_flush_timeout: hold packets across polls for this long (ns)."),
    Option("napi_budget", "--napi-budget", type=click.IntRange(0), default=0, metavar="N",
           field="napi_budget",
           help="Packets per NAPI poll (64 in most drivers); 0 = polls end only at gaps."),
    Option("hz", "--hz", type=click.Choice(["100", "250", "300", "1000"]), default="250",
           field="hz", to_field=int,
           help="Kernel tick rate, for the 'old packets only' flush rule."),
    Option("poll_gap", "--poll-gap", type=click.IntRange(0), default=1_000_000, metavar="NS",
           field="poll_gap_ns",
           help="A gap between packets longer than this ends a NAPI poll (ns)."),
    Option("poll_model", "--poll-model", type=click.Choice(["gap", "work"]), default="gap",
           field="poll_model",
           help="NAPI polls: 'gap' = a poll ends at a gap over --poll-gap (compiled loop); "
                "'work' = polls follow the receiver's work (--poll-wake, --poll-rx-cost, "
                "--deliver-cost, --deliver-seg-cost, --napi-budget)."),
    Option("poll_wake", "--poll-wake", type=click.IntRange(0), default=28_000, metavar="NS",
           field="poll_wake_ns",
           help="--poll-model work: from a packet finding the device idle to its poll (ns)."),
    Option("poll_rx_cost", "--poll-rx-cost", type=click.IntRange(0), default=5_000,
           metavar="NS", field="poll_rx_ns",
           help="--poll-model work: receive work per packet (ns)."),
    Option("deliver_cost", "--deliver-cost", type=click.IntRange(0), default=10_000,
           metavar="NS", field="deliver_ns",
           help="--poll-model work: handing a poll's packets up, fixed part (ns)."),
    Option("deliver_seg_cost", "--deliver-seg-cost", type=click.IntRange(0), default=2_000,
           metavar="NS", field="deliver_seg_ns",
           help="--poll-model work: handing up, per packet of the poll (ns)."),
    Option("hash", "--hash", type=click.Choice(["flow", "none"]), default="flow", field="hash",
           help="Flow hash: 'flow' = each flow its own (RSS, local sockets), "
                "'none' = all in GRO bucket 0 (tcpreplay into a veth)."),
    Option("udp", "--udp", type=click.Choice(["off", "gro"]), default="off", field="udp",
           help="UDP GRO: 'gro' = rx-udp-gro-forwarding on and UDP_GRO on local sockets."),
    Option("fraglist", "--fraglist", field="fraglist",
           help="rx-gro-list on: forwarded TCP and UDP flows use fraglist GRO."),
    Option("local_ports", "--local-port", type=click.IntRange(0, 65535), default=(),
           multiple=True, metavar="PORT", field="local_ports", to_field=frozenset,
           help="Flows to PORT have a local socket (repeatable)."),
    *TUNNEL_OPTIONS,
    Option("no_vlan_gro", "--no-vlan-gro", field="vlan_gro", to_field=_not,
           help="No VLAN GRO handler (a kernel built without CONFIG_VLAN_8021Q): "
                "802.1Q/802.1ad-tagged frames pass unmerged."),
    Option("gso", "--gso",
           help="Forward: after GRO, segment every aggregate as a Linux forwarder's "
                "egress GSO does (TTL/hop limit - 1; fraglist gives the packets back)."),
    Option("egress_mtu", "--egress-mtu", type=click.IntRange(68, 65535), metavar="N",
           help="With --gso: egress MTU; DF/IPv6 aggregates that do not fit are dropped "
                "(ICMP counted), IPv4 without DF is fragmented."),
    Option("bridge", "--bridge", help="With --gso: a bridge, not a router (no TTL change)."),
)

SPLIT_OPTIONS = (
    Option("mss", "--mss", type=click.IntRange(8, 65535), metavar="N", field="mss",
           help="TCP segment payload size for every flow (default: per flow from the "
                "capture: SYN MSS, gso_size recorded by pcapgro merge, largest "
                "segment, else what fits --mtu)."),
    Option("mtu", "--mtu", type=click.IntRange(68, 65535), metavar="N",
           field="mtu", help="Largest L3 length of a segment [default: 1500, used when no "
                             "MSS is known]; given, it caps every segment size but --mss."),
    Option("gso_size", "--gso-size", type=click.IntRange(8, 65535), metavar="N",
           field="gso_size",
           help="UDP datagram payload size (UDP super-packets need it, except "
                "pcapgro merge's own aggregates, which record it)."),
    Option("fixed_id", "--fixed-id", field="fixed_id",
           help="Keep the IPv4 ID on every segment (SKB_GSO_TCP_FIXEDID)."),
    Option("restore", "--restore",
           help="Give back the exact original packets of pcapgro merge's own aggregates "
                "(pcapng written by merge); other packets pass unchanged."),
)


def resolve(table, given, explicit=False):
    """Every option of ``table`` with its value: ``given`` (dict name ->
    value, only the options the caller set) checked, the rest defaults.

    ``explicit``: True when every name in ``given`` was set by the user
    (the command line): all count as set; False (the library): only those
    whose value differs from the default (``fraglist=False`` sets nothing).
    Returns (values: dict name -> value, set: tuple of the Options set, in
    table order).  Raises TypeError for a name not in ``table``,
    OptionError for a bad value."""
    names = {o.name: o for o in table}
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"unknown option{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    values = {}
    chosen = []
    for o in table:
        default = False if o.is_flag else o.default
        if o.name in given:
            v = values[o.name] = o.check(given[o.name])
            if explicit or v != (o.check(default) if default is not None else None):
                chosen.append(o)
        else:
            values[o.name] = default
    return values, tuple(chosen)


def _config(table, values, cls, **extra):
    kw = {o.field: o.field_value(values[o.name]) for o in table if o.field is not None}
    kw.update(extra)
    return cls(**kw)


def gro_config(values, annotate):
    """The :class:`~pcapgro.gro.GROConfig` of merge's option ``values``
    (from :func:`resolve`); ``annotate``: pcapng output."""
    from ..gro import GROConfig
    return _config(MERGE_OPTIONS, values, GROConfig, annotate=annotate)


def gso_config(values, annotate):
    """The :class:`~pcapgro.gso.GSOConfig` of split's option ``values``."""
    from ..gso import GSOConfig
    return _config(SPLIT_OPTIONS, values, GSOConfig, annotate=annotate)


def check_merge(values, given):
    """Refuse merge options that do not go together (OptionError): the
    forwarding options without ``--gso``; any GRO option with ``--no-gro``
    (it would do nothing)."""
    if (values["egress_mtu"] or values["bridge"]) and not values["gso"]:
        raise OptionError("--egress-mtu and --bridge go with --gso")
    if values["no_gro"]:
        for o in given:
            if o.gro:
                raise OptionError(f"{o.flag} needs GRO (drop --no-gro)")


def check_split(values, given):
    """Refuse ``--restore`` with segmentation options (OptionError)."""
    if values["restore"] and any(values[k] for k in ("mss", "gso_size", "fixed_id")):
        raise OptionError("--restore takes no segmentation options")


def _calibrate_option(o):
    """Merge's option ``o`` as calibrate takes it (``--csum`` defaults to
    what a receiver's capture holds)."""
    if o.name == "csum":
        return replace(o, default="kernel",
                       help="Checksums on the receiver's aggregates: the kernel's (pseudo-header "
                            "seed; fraglist: the first packet's), or valid ones.")
    return o


# calibrate's: merge's GRO options (the timing ones given are kept, not
# fitted); no pass-through or forwarding
CALIBRATE_OPTIONS = tuple(_calibrate_option(o) for o in MERGE_OPTIONS
                          if o.name not in ("no_gro", "gso", "egress_mtu", "bridge"))
