"""GSO splitter configuration."""

from dataclasses import dataclass
from typing import Optional

from ..errors import UnusableInput

__all__ = ["GSOConfig", "TCP_MIN_GSO_SIZE", "MIN_MTU"]

TCP_MIN_GSO_SIZE = 8    # bytes (include/net/tcp.h): smallest TCP gso_size
MIN_MTU = 68            # bytes: smallest IPv4 MTU (RFC 791)


@dataclass
class GSOConfig:
    """How super-frames are cut.

    Attributes:
        mss:        TCP segment payload size in bytes for every flow
                    (``--mss``); None = per flow from the capture (peer's SYN
                    MSS, own SYN MSS, largest non-super segment, else what
                    fits ``mtu``).  Also the super-frame test: a TCP packet
                    is split when its payload > mss.
        mtu:        bytes, largest L3 length (IP header + extension headers
                    + L4) of a segment made from the MTU rule (``--mtu``;
                    None = 1500, not explicit).  Given explicitly it also
                    caps every segment size but ``mss`` (a loopback SYN's
                    MSS 65495 does not beat ``--mtu 1500``): then
                    ``mtu_explicit`` is True.  Without ``mss`` and without a SYN MSS, a
                    TCP packet is a super-frame when its L3 length > mtu; a
                    UDP packet without ``gso_size`` whose L3 length > mtu is
                    an error (UnusableInput), and so is a TCP super-frame
                    cut by this rule whose headers plus 8 bytes of payload
                    exceed mtu.
        gso_size:   UDP datagram payload size in bytes (``--gso-size``); a
                    UDP packet is split when its payload > gso_size.  None =
                    UDP is never split.
        fixed_id:   True = every TCP segment keeps the super-frame's IPv4 ID
                    (SKB_GSO_TCP_FIXEDID); False = ID + k for segment k.
                    UDP always gets ID + k (the kernel sets FIXEDID only for
                    TCP).
        link_rate:  bit/s assumed for spreading segment timestamps (see
                    :mod:`pcapgro.gso.engine`); 0 = every segment keeps the
                    super-frame's timestamp.  Default 10 Gbit/s.
        complete_csum: complete partial checksums of packets that need no
                    split: a TCP/UDP checksum field holding exactly the
                    pseudo-header seed (what a sender with checksum offload
                    captures) gets the valid value its NIC writes on the
                    wire; every other passed packet stays byte-identical.
                    False = pass everything byte-identical.
        from_skb:   mss and gso_size are an skb's gso_size (merge --gso
                    forwarding an aggregate), not options: any size from 1
                    (tcp_gso_segment takes any gso_size; TCP_MIN_GSO_SIZE
                    bounds only what a sender picks, tcp_output.c).
        annotate:   clear the pcapng "TCP segmentation offloaded" EPB flag
                    (bit 11) and, on segments with a computed checksum, the
                    "checksum not ready" flag (bit 9) of segments.  (Segments
                    never carry pcapgro's own comments, aggregate note and
                    restore record, of the packet they are cut from.)

    Raises (on construction):
        UnusableInput: mss / gso_size < 8 (< 1 with from_skb), mtu < 68,
            negative link_rate.
    """

    mss: Optional[int] = None
    mtu: Optional[int] = None
    gso_size: Optional[int] = None
    fixed_id: bool = False
    link_rate: int = 10_000_000_000
    complete_csum: bool = True
    annotate: bool = True
    from_skb: bool = False

    def __post_init__(self):
        self.mtu_explicit = self.mtu is not None
        if self.mtu is None:
            self.mtu = 1500
        least = 1 if self.from_skb else TCP_MIN_GSO_SIZE
        if self.mss is not None and not (least <= self.mss <= 0xFFFFFF):
            raise UnusableInput(f"--mss {self.mss}: must be at least {least}")
        if self.gso_size is not None and not (least <= self.gso_size <= 0xFFFF):
            raise UnusableInput(f"--gso-size {self.gso_size}: must be {least}..65535")
        if self.mtu < MIN_MTU:
            raise UnusableInput(f"--mtu {self.mtu}: must be at least {MIN_MTU}")
        if self.link_rate < 0:
            raise UnusableInput(f"link rate {self.link_rate}: must be >= 0")
