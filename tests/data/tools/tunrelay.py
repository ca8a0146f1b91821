#!/usr/bin/env python3
"""A user-space IPv4 tunnel endpoint: GRE (RFC 2784, or RFC 2890 with key
and checksum) or IP-in-IP, for kernels without gre/ipip devices (used by
tests/data/capture-gre.sh, as root, inside a network namespace).

Inner side: a TUN device (IFF_TUN | IFF_NO_PI | IFF_VNET_HDR) carrying the
inner IPv4 packets of the local TCP stack.  Outer side: a veth, through
AF_PACKET sockets.  Each inner packet read from the TUN is sent as one
Ethernet frame: outer IPv4 (DF, TTL 64, IDs counting up by one from
FIRST_ID) + GRE/nothing + the inner packet.  Frames read from the veth
(ETH_P_ALL, so before any tc ingress rule) addressed to LOCAL with the
tunnel's protocol lose their outer headers and go into the TUN; a GRO
aggregate (up to 64 KiB: the virtio-net header from PACKET_VNET_HDR gives
its gso_size) is written with a virtio-net header of gso_type TCPV4 and
NEEDS_CSUM, so the stack takes it as it would take it from a tunnel device.

With BATCH_IDLE_US set (the sender), frames read from the TUN are gathered
until the TUN has been idle that long (or MAX_BATCH are there), then sent
back to back; the next batch waits BATCH_GAP_US after that.  The capture
script runs this process SCHED_FIFO on the CPU of the peer's threaded NAPI
(a lower SCHED_FIFO priority), so one batch is one poll on the receiver.
Usage: tunrelay.py MODE TUN VETH LOCAL REMOTE PEER_MAC ADDR/PLEN MTU
  MODE: gre | grekc (key 42 + checksum) | ipip
Prints "ready" on stdout once the TUN is up; runs until killed.
"""

import fcntl
import os
import select
import socket
import struct
import subprocess
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI, IFF_VNET_HDR = 0x0001, 0x1000, 0x4000
ETH_P_ALL, ETH_P_IP = 0x0003, 0x0800
SOL_PACKET, PACKET_VNET_HDR = 263, 15
VNET = struct.Struct("=BBHHHH")      # flags, gso_type, hdr_len, gso_size, csum_start, csum_offset
VNET_F_NEEDS_CSUM, VNET_GSO_TCPV4, VNET_GSO_ECN = 1, 1, 0x80
GRE_C, GRE_K, GRE_S = 0x8000, 0x2000, 0x1000
KEY = 42
MAX_BATCH = 64                       # frames per batch: the receiver's NAPI budget


def csum(b):
    """The Internet checksum (RFC 1071) of bytes ``b``, as an int."""
    if len(b) & 1:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def tunnel_header(mode, inner):
    """(IP protocol, tunnel header bytes) for one inner IPv4 packet."""
    if mode == "ipip":
        return 4, b""
    if mode == "gre":
        return 47, struct.pack("!HH", 0, ETH_P_IP)
    h = struct.pack("!HHHHI", GRE_C | GRE_K, ETH_P_IP, 0, 0, KEY)
    c = csum(h + inner)
    return 47, h[:4] + struct.pack("!H", c) + h[6:]


def strip(mode, frame, local):
    """The inner IPv4 packet of an Ethernet frame of our tunnel, or None."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[30:34] != local:
        return None
    ihl = (frame[14] & 15) * 4
    proto = frame[23]
    tot = struct.unpack_from("!H", frame, 16)[0]
    ip = frame[14:14 + tot]
    if mode == "ipip":
        return ip[ihl:] if proto == 4 else None
    if proto != 47:
        return None
    flags, et = struct.unpack_from("!HH", ip, ihl)
    if et != ETH_P_IP:
        return None
    hl = 4 + 4 * bool(flags & GRE_C) + 4 * bool(flags & GRE_K) + 4 * bool(flags & GRE_S)
    return ip[ihl + hl:]


def outer(mode, inner, ident, lip, rip):
    """Outer IPv4 header (ID ``ident``, DF, TTL 64) + tunnel header + inner."""
    proto, th = tunnel_header(mode, inner)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(th) + len(inner), ident & 0xFFFF,
                    0x4000, 64, proto, 0, lip, rip)
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + th + inner


def from_veth(rx, tun, mode, lip):
    """Move every queued tunnel frame of the veth into the TUN."""
    while True:
        try:
            b, a = rx.recvfrom(1 << 17, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        if a[2] == socket.PACKET_OUTGOING:
            continue
        inner = strip(mode, b[10:], lip)
        if inner is not None:
            to_tun(tun, inner, b[:10])


def open_tun(name):
    """A new TUN device ``name`` (IPv4 packets behind a virtio-net header),
    non-blocking: its file descriptor."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI | IFF_VNET_HDR))
    return fd


def to_tun(tun, inner, vh):
    """Write one inner packet into the TUN; ``vh``: the virtio-net header
    the packet socket gave the outer frame (a GRO aggregate has gso_size)."""
    _flags, gso_type, _hl, gso_size, _cs, _co = VNET.unpack(vh)
    if gso_type:
        ihl = (inner[0] & 15) * 4
        thl = (inner[ihl + 12] >> 4) * 4
        hdr = VNET.pack(VNET_F_NEEDS_CSUM, VNET_GSO_TCPV4 | (gso_type & VNET_GSO_ECN),
                        ihl + thl, gso_size, ihl, 16)
    else:
        hdr = VNET.pack(0, 0, 0, 0, 0, 0)
    try:
        os.write(tun, hdr + inner)
    except OSError as e:
        print(f"tunrelay: write to tun: {e}", file=sys.stderr)


def main(argv):
    mode, tname, veth, local, remote, peer_mac, addr, mtu = argv
    lip, rip = socket.inet_aton(local), socket.inet_aton(remote)
    with open(f"/sys/class/net/{veth}/address") as f:
        my_mac = bytes.fromhex(f.read().strip().replace(":", ""))
    eth = bytes.fromhex(peer_mac.replace(":", "")) + my_mac + b"\x08\x00"
    tun = open_tun(tname)
    for cmd in (["ip", "link", "set", tname, "mtu", mtu],
                ["ip", "addr", "add", addr, "dev", tname],
                ["ip", "link", "set", tname, "up"]):
        subprocess.run(cmd, check=True)
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    rx.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.bind((veth, ETH_P_ALL))
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    tx.bind((veth, 0))
    ident = int(os.environ.get("FIRST_ID", "4096"))
    idle = int(os.environ.get("BATCH_IDLE_US", "0")) / 1e6
    pause = int(os.environ.get("BATCH_GAP_US", "0")) / 1e6
    batch, last_in, next_ok = [], 0.0, 0.0
    print("ready", flush=True)
    while True:
        now = time.monotonic()
        timeout = None
        if batch:
            timeout = max(0.0, last_in + idle - now, next_ok - now)
            if len(batch) >= MAX_BATCH:
                timeout = max(0.0, next_ok - now)
        r, _, _ = select.select([tun, rx], [], [], timeout)
        if rx in r:
            from_veth(rx, tun, mode, lip)
        if tun in r:
            while True:
                try:
                    batch.append(os.read(tun, 1 << 17)[10:])
                except BlockingIOError:
                    break
            last_in = time.monotonic()
        now = time.monotonic()
        if batch and now >= next_ok and (len(batch) >= MAX_BATCH or now >= last_in + idle):
            for inner in batch[:MAX_BATCH]:
                tx.send(eth + outer(mode, inner, ident, lip, rip))
                ident += 1
            del batch[:MAX_BATCH]
            next_ok = time.monotonic() + pause


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        pass
