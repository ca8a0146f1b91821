"""Tunnel frames for the tests: an inner frame of :class:`pktbuild.Flow`
wrapped in VXLAN, Geneve, GRE or IP-in-IP outer headers.

Plain ``struct`` (checksums from pktbuild's independent helpers), so the
expected frames of the tests are computed without pcapgro.
"""

import struct

from pcapgro.record import Packet

from pktbuild import (ETH_P_IP, ETH_P_IPV6, csum16, eth, inet_sum, ipv4, ipv6,
                      pseudo_header)

ETH_P_TEB = 0x6558
UDP_KINDS = ("vxlan", "geneve")


class Tunnel:
    """One tunnel's outer headers; :meth:`wrap` puts a frame inside them.

    Args: kind 'vxlan' | 'geneve' | 'gre' | 'ipip' (the inner IP version
    picks IPIP/SIT, the outer ``family`` IP4IP6/IP6IP6); family (outer
    IP version); src/dst (outer addresses); sport/dport (UDP); vni;
    udp_csum ('zero', 'valid', 'seed'); gre_key (int or None); gre_csum
    (bool); gre_flags (extra flag bits); gre_teb (GRE carries the inner
    Ethernet frame); geneve_opts (bytes, a multiple of 4); geneve_ver;
    ttl, tos, df, ipid ('inc' from ``ipid0``, or an int).
    """

    def __init__(self, kind, family=4, src=None, dst=None, sport=40000, dport=None,
                 vni=42, udp_csum="zero", gre_key=None, gre_csum=False, gre_flags=0,
                 gre_teb=False, geneve_opts=b"", geneve_ver=0, ttl=64, tos=0, df=False,
                 ipid="inc", ipid0=100):
        self.kind, self.family = kind, family
        self.src = src or ("10.0.0.1" if family == 4 else "fd00::1")
        self.dst = dst or ("10.0.0.2" if family == 4 else "fd00::2")
        self.sport = sport
        self.dport = dport or {"vxlan": 4789, "geneve": 6081}.get(kind, 0)
        self.vni, self.udp_csum = vni, udp_csum
        self.gre_key, self.gre_csum, self.gre_flags, self.gre_teb = (
            gre_key, gre_csum, gre_flags, gre_teb)
        self.geneve_opts, self.geneve_ver = geneve_opts, geneve_ver
        self.ttl, self.tos, self.df = ttl, tos, df
        self.ipid, self.next_id = ipid, ipid0

    def _udp(self, body, csum):
        ln = 8 + len(body)
        d = bytearray(struct.pack("!HHHH", self.sport, self.dport, ln, 0) + body)
        if csum == "valid":
            c = csum16(pseudo_header(self.src, self.dst, 17, ln) + bytes(d)) or 0xFFFF
        elif csum == "seed":
            c = inet_sum(pseudo_header(self.src, self.dst, 17, ln))
        elif csum == "zero":
            c = 0
        else:
            c = int(csum)
        struct.pack_into("!H", d, 6, c)
        return bytes(d)

    def _gre(self, body, et, csum):
        flags = self.gre_flags | (0x8000 if self.gre_csum else 0) | \
            (0x2000 if self.gre_key is not None else 0)
        h = struct.pack("!HH", flags, et)
        if self.gre_csum:
            h += b"\0\0\0\0"
        if self.gre_key is not None:
            h += struct.pack("!I", self.gre_key)
        if flags & 0x1000:
            h += struct.pack("!I", 7)            # a sequence number
        d = bytearray(h + body)
        if self.gre_csum:
            c = csum16(bytes(d)) if csum == "valid" else int(csum)
            struct.pack_into("!H", d, 4, c)
        return bytes(d)

    def payload(self, inner, csum=None):
        """The outer IP payload (tunnel header + inner) and its IP protocol,
        ``inner`` an Ethernet frame (bytes)."""
        csum = csum if csum is not None else (self.udp_csum if self.kind in UDP_KINDS
                                              else "valid")
        et = struct.unpack_from("!H", inner, 12)[0]
        if self.kind == "vxlan":
            return self._udp(struct.pack("!II", 0x08000000, self.vni << 8) + inner, csum), 17
        if self.kind == "geneve":
            ol = len(self.geneve_opts) // 4
            h = struct.pack("!BBHI", (self.geneve_ver << 6) | ol, 0, ETH_P_TEB,
                            self.vni << 8) + self.geneve_opts
            return self._udp(h + inner, csum), 17
        if self.kind == "gre":
            if self.gre_teb:
                return self._gre(inner, ETH_P_TEB, csum), 47
            return self._gre(inner[14:], et, csum), 47
        return inner[14:], (4 if et == ETH_P_IP else 41)

    def wrap(self, pkt, ident=None, csum=None, ttl=None, tos=None, df=None, ts=None):
        """``pkt`` (an Ethernet Packet) inside this tunnel, as a Packet;
        keyword overrides of the outer fields; ``csum``: the outer UDP /
        GRE checksum ('valid', 'seed', 'zero' or an int)."""
        body, proto = self.payload(bytes(pkt.data), csum)
        if ident is None:
            ident = self.next_id if self.ipid == "inc" else self.ipid
            self.next_id = (self.next_id + 1) & 0xFFFF
        if self.family == 4:
            l3 = ipv4(body, self.src, self.dst, proto=proto, tos=self.tos if tos is None else tos,
                      ttl=self.ttl if ttl is None else ttl, ident=ident,
                      df=self.df if df is None else df)
            f = eth(l3, ETH_P_IP)
        else:
            l3 = ipv6(body, self.src, self.dst, nh=proto, tc=self.tos if tos is None else tos,
                      hlim=self.ttl if ttl is None else ttl)
            f = eth(l3, ETH_P_IPV6)
        return Packet(pkt.ts if ts is None else ts, f, len(f), pkt.iface, pkt.linktype)
