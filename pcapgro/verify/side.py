"""One capture as verify reads it: each line of tshark's ``-T fields``
output becomes a packet record of its stream (:class:`~.stream.Flow`) or
an entry of the other packets' queue; nothing per frame is kept beyond
what the comparison has not consumed yet."""

from __future__ import annotations

import hashlib
from collections import deque

from .fields import (SEP, AGG, _NFIELDS, _NLOCATED, F_NUM, F_TS, F_LEN, F_CAPLEN, F_PROTOS,
                     F_MD5, F_CB, F_VLAN, F_IPSRC, F_IPDST, F_V6SRC, F_V6DST, F_MF, F_FRAGOFF,
                     F_V6FRAG,
                     F_IPCS, F_TSPORT, F_TDPORT, F_SEQ, F_ACK, F_TLEN, F_TFLAGS, F_TCS, F_TPAY,
                     F_USPORT, F_UDPORT, F_ULEN, F_UCS, F_UPAY, F_MAL, F_SEV, F_GRP, F_IPHL,
                     F_UCSUM, F_PAD, F_TRAILER, F_GRECS, _SEV_ERROR, _GRP_CHECKSUM, _BAD, _TRUE, _FALSE,
                     CAT_IPCS, CAT_L4CS, CAT_MAL, CAT_EXPERT, MAX_PROBLEMS,
                     _last, _int, _unhex, _parse_ts, _key)
from .fields import DECODE_AS
from .payload import NeedPayload, NO_TUNNELS, tcp_payload, udp_payload
from .stream import Flow, SYN, FIN, RST

TS_BACK_KEPT = 10       # frames named when timestamps go backwards; more are counted

def _udp_inside(protos):
    """False when the last UDP of ``protos`` (tshark's frame.protocols) is
    a tunnel's, carrying something other than UDP (ARP, ICMP inside VXLAN):
    the frame is then compared as an other packet."""
    tun = max(protos.rfind(":vxlan"), protos.rfind(":geneve"))
    return tun < 0 or protos.rfind(":udp") > tun


# TCP flags that make tcp_gro_receive flush a segment with no held packet
# of its flow (out_check_final): it goes up at once
_HANDED_UP_AT_ONCE = 0x01 | 0x02 | 0x04 | 0x08 | 0x20     # FIN SYN RST PSH URG


def _gre_other_flow(st, cs):
    """Whether a packet of TCP stream ``st`` inside GRE with a checksum
    (``cs``: tshark's gre.checksum) is another GRO flow than the packet
    before it: gre_gro_receive (net/ipv4/gre_offload.c) compares the word
    after the GRE base header, the checksum when the C bit is set (the key
    only without it), and over valid inner packets the checksum follows
    the inner length, so a shorter segment is a flow of its own.  With
    FIN/SYN/RST/PSH/URG (:data:`_HANDED_UP_AT_ONCE`) it goes up at once,
    ahead of the aggregate before it, and is treated as a packet GRO
    rejects before matching; without, it is held (and flushed after that
    aggregate: same bucket, older first), so it may not overtake.
    Remembers ``cs``."""
    other = st.npkts > 0 and cs != st.gre_cs
    st.gre_cs = cs
    return other


class Side:
    """What verify keeps of one capture (``label`` 'IN' or 'OUT', ``index``
    0 or 1): its flows, the other packets not compared yet, counts and the
    first frames of timestamp and length problems.  ``tunnels``: the UDP
    ports dissected as VXLAN / Geneve (:class:`~.payload.Tunnels`) and
    ``decode`` tshark's ``-d`` entries (:func:`~.fields.decode_as`)."""

    def __init__(self, label, path, index=0, on_flow=None, tunnels=NO_TUNNELS,
                 decode=DECODE_AS):
        self.label, self.path, self.index = label, path, index
        self.tunnels, self.decode = tunnels, decode
        self.on_flow = on_flow  # called with (side, proto, flow) for each new flow
        self.frames = 0
        self.cb_frames = 0
        self.tcp = {}           # (key, gen) -> Flow
        self.tcp_cur = {}       # key -> current Flow
        self.udp = {}           # key -> Flow
        self.other = deque()    # (frame, md5, len, cats) not compared yet
        self.n_other = 0
        self.bytes_read = 0     # captured bytes + 16 per record so far (progress)
        self.ts_back = []       # first frames whose timestamp went backwards
        self.n_ts_back = 0
        self.len_bad = []       # first (frame, message) of captured length > frame length
        self.n_len_bad = 0
        self.last_ts = None
        self.error = None       # tshark's complaint (cut short, ...)
        self.md5 = True
        self._keys = {}
        self.pkts = None        # the capture's packets when payloads are located (payload.py)
        self.nfields = _NFIELDS
        self._pkt = None        # the packet of the line being parsed (located mode)

    def locate_payloads(self, pkts):
        """Take payloads (and other packets' MD5) from ``pkts`` (an iterator
        of the capture's :class:`~pcapgro.record.Packet`, file order)
        instead of tshark's hex fields, which are then not asked for."""
        self.pkts = pkts
        self.nfields = _NLOCATED

    def close(self):
        """Close the capture reader of located mode."""
        if self.pkts is not None:
            self.pkts.close()

    def _new_flow(self, proto, key, gen):
        fl = Flow(key, gen)
        if self.on_flow is not None:
            self.on_flow(self, proto, fl)
        return fl

    # -- one tshark output line (the hot loop: keep it lean)
    def line(self, line):
        f = line.split(SEP)
        if len(f) < self.nfields:
            return
        frame = int(f[F_NUM])
        if f[F_CB]:
            self.cb_frames += 1
            return
        self.frames += 1
        ts = _parse_ts(f[F_TS])
        if ts is not None:
            if self.last_ts is not None and ts < self.last_ts:
                self.n_ts_back += 1
                if len(self.ts_back) < TS_BACK_KEPT:
                    self.ts_back.append(frame)
            self.last_ts = ts
        flen, caplen = _int(f[F_LEN]), _int(f[F_CAPLEN])
        if self.pkts is not None:
            pkt = self._pkt = next(self.pkts, None)
            if pkt is None or len(pkt.data) != caplen or pkt.orig_len != flen:
                raise NeedPayload(frame, "not the frame pcapgro's reader has there")
        if caplen is not None:
            self.bytes_read += caplen + 16
        if flen is not None and caplen is not None and caplen > flen:
            self.n_len_bad += 1
            if len(self.len_bad) < MAX_PROBLEMS:
                self.len_bad.append((frame, f"captured length {caplen} > frame length {flen}"))
        cats = None
        if f[F_MAL] or f[F_SEV] or "0" in f[F_IPCS] or "B" in f[F_IPCS]:
            cats = set()
            if f[F_MAL]:
                cats.add(CAT_MAL)
            if f[F_SEV]:
                grps = f[F_GRP].split(AGG)
                for i, sv in enumerate(f[F_SEV].split(AGG)):
                    if sv in _SEV_ERROR and (i >= len(grps) or grps[i] not in _GRP_CHECKSUM):
                        cats.add(CAT_EXPERT)
            if f[F_IPCS] and not _BAD.isdisjoint(f[F_IPCS].split(AGG)):
                cats.add(CAT_IPCS)
        # rejected by GRO before flow matching (so it may overtake its flow's
        # held aggregate): bad IPv4 header checksum, a header cut short
        # (malformed), IPv4 options; L4 checksums are added in _tcp / _udp
        hl = f[F_IPHL]
        rej = ((cats is not None and (CAT_IPCS in cats or CAT_MAL in cats))
               or (hl != "" and hl != "20" and any(x != "20" for x in hl.split(AGG))))
        protos = f[F_PROTOS]
        mf, fo = f[F_MF], f[F_FRAGOFF]
        plain = ("icmp" not in protos and not f[F_V6FRAG]
                 and (not mf or mf in _FALSE or _TRUE.isdisjoint(mf.split(AGG)))
                 and (not fo or fo == "0" or all(x in ("", "0") for x in fo.split(AGG))))
        if plain and f[F_SEQ] and f[F_TLEN] and f[F_TSPORT] and ":tcp" in protos:
            self._tcp(frame, f, cats, rej, ts)
        elif (plain and f[F_USPORT] and f[F_ULEN] and ":udp" in protos
              and (not self.tunnels or _udp_inside(protos))):
            self._udp(frame, f, cats, rej, ts)
        else:
            self.n_other += 1
            md5 = f[F_MD5] if self.pkts is None else hashlib.md5(self._pkt.data).hexdigest()
            self.other.append((frame, md5, flen, frozenset(cats or ())))

    def key(self, f, sport, dport):
        """(vlan ids, src, sport, dst, dport) of the innermost IP header, cached."""
        ck = (f[F_PROTOS], f[F_VLAN], f[F_IPSRC], f[F_IPDST], f[F_V6SRC], f[F_V6DST], sport, dport)
        k = self._keys.get(ck)
        if k is None:
            k = self._keys[ck] = _key(f, f[F_PROTOS].split(":"), sport, dport)
        return k

    def _tcp(self, frame, f, cats, rej, ts):
        key = self.key(f, f[F_TSPORT], f[F_TDPORT])
        v = f[F_SEQ]
        raw = int(v if AGG not in v else _last(v))
        v = f[F_TLEN]
        nominal = int(v if AGG not in v else _last(v))
        v = f[F_TFLAGS]
        flags = int(v if AGG not in v else _last(v), 16) if v else 0
        if self.pkts is not None:
            payload = tcp_payload(self._pkt, frame, int(_last(f[F_TSPORT])),
                                  int(_last(f[F_TDPORT])), raw, nominal,
                                  self.tunnels) if nominal > 0 else b""
        else:
            v = f[F_TPAY]
            payload = _unhex(v if AGG not in v else _last(v)) if v else b""
            if len(payload) > nominal:
                payload = payload[:nominal]
        v = f[F_TCS]
        if v and (v if AGG not in v else _last(v)) in _BAD:
            if cats is None:
                cats = set()
            cats.add(CAT_L4CS)
            rej = True
        st = self.tcp_cur.get(key)
        if st is None or (flags & SYN and st.npkts and st.syn_seq is not None
                          and raw != st.syn_seq) or (flags & SYN and st.syn_seq is None
                                                      and st.npkts):
            gen = 0 if st is None else st.gen + 1
            st = self._new_flow("tcp", key, gen)
            self.tcp_cur[key] = st
            self.tcp[(key, gen)] = st
        if f[F_GRECS] and _gre_other_flow(st, f[F_GRECS]) and flags & _HANDED_UP_AT_ONCE:
            rej = True
        st.npkts += 1
        a = st.abs_seq(raw)
        if flags & 0x07:
            if flags & SYN:
                if st.syn_seq is None:
                    st.syn_seq = raw
                st.events.setdefault(("SYN", a), frame)
                a += 1
            if flags & RST:
                st.events.setdefault(("RST", a), frame)
            if flags & FIN:
                st.events.setdefault(("FIN", a + nominal), frame)
        elif nominal == 0 and f[F_ACK]:
            st.n_acks += 1
            st.last_ack_frame = frame
            st.acks.append((int(_last(f[F_ACK])), frame))
        st.add((frame, a, nominal, payload, frozenset(cats) if cats else None, rej, ts))

    def _udp(self, frame, f, cats, rej, ts):
        key = self.key(f, f[F_USPORT], f[F_UDPORT])
        ulen = _int(_last(f[F_ULEN]))
        if self.pkts is not None:
            payload = udp_payload(self._pkt, frame, int(_last(f[F_USPORT])),
                                  int(_last(f[F_UDPORT])), 1 << 32, self.tunnels)
        else:
            payload = _unhex(_last(f[F_UPAY])) if f[F_UPAY] else b""
        declared = ulen - 8 if ulen is not None and ulen >= 8 else len(payload)
        if ulen == 0:                   # IPv6 jumbogram
            declared = len(payload)
        payload = payload[:declared]
        if f[F_UCS] and _last(f[F_UCS]) in _BAD:
            if cats is None:
                cats = set()
            cats.add(CAT_L4CS)
            rej = True
        # UDP GRO also rejects checksum 0 and a UDP length other than the
        # bytes present (Ethernet padding or trailer after the datagram)
        if _last(f[F_UCSUM]) in ("0x0000", "0") or f[F_PAD] or f[F_TRAILER]:
            rej = True
        st = self.udp.get(key)
        if st is None:
            st = self.udp[key] = self._new_flow("udp", key, 0)
        st.npkts += 1
        a = st.udp_end
        st.udp_end += declared
        st.add((frame, a, declared, payload, frozenset(cats) if cats else None, rej, ts))

