"""Live interface input: packets from a capture program, through a pipe.

pcapgro does not open raw sockets of its own: it runs ``tcpdump`` (libpcap,
the most widely installed and best-kept capture engine; it takes BPF
filters, snaplen, counts, ``-i any``, and writes classic pcap to a pipe
with ``-U``, packet-buffered) and reads its standard output with the same
reader as a file (:func:`pcapgro.capture.open_reader_file`), so a live
capture goes through exactly the pipeline a file does.

Keeping up: tcpdump runs with ``--immediate-mode`` (packets handed over as
they come), where libpcap uses a TPACKET_V2 ring of fixed-size slots: on an
interface with offloads each slot takes ~64 KiB, so tcpdump's default 2 MiB
buffer holds ~30 packets and a 1 Gbit/s stream overflows it within a
millisecond of any pause.  pcapgro therefore leaves immediate mode off by
default (TPACKET_V3: packets packed into blocks, ~45,000 full-size packets
in 64 MiB, handed over a block at a time: up to a second late at a trickle),
gives tcpdump ``-B`` :data:`DEFAULT_BUFFER_KIB`, and never makes it wait:
a pump process (:mod:`pcapgro.livepump`) reads tcpdump's output as fast as
it comes into memory (up to :data:`MAX_BACKLOG` bytes not yet merged) and
hands it on as fast as the merge reads, through pipes enlarged to
``/proc/sys/fs/pipe-max-size``.

Losses: tcpdump's closing statistics on its standard error ("N packets
captured", "N packets received by filter", "N packets dropped by kernel",
"N packets dropped by interface") are parsed (:meth:`LiveCapture.statistics`);
:meth:`LiveCapture.request_stats` asks a running tcpdump for them (SIGUSR1)
so a progress line can show drops so far.

Stopping: Ctrl-C (SIGINT), SIGTERM or SIGHUP to pcapgro is forwarded to tcpdump,
which ends its capture and closes the pipe; pcapgro then reads to the end,
flushes what GRO holds, writes complete output and exits 0 (4 when packets
were lost).  ``duration`` stops tcpdump the same way after that many seconds.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

from .capture import open_reader_file
from .errors import UnusableInput

__all__ = ["LiveCapture", "DEFAULT_BUFFER_KIB", "MIN_BUFFER_KIB", "parse_stats"]

DEFAULT_BUFFER_KIB = 65536
"""tcpdump's ``-B`` (KiB of kernel capture buffer) unless told otherwise:
64 MiB, ~1,000 slots of 64 KiB, ~12 ms of a 1 Gbit/s stream of
1500-byte packets (measured: a merge of 3 s of iperf3 ``-b 1G`` on a veth
drops nothing; with 32 MiB it dropped in some runs)."""

MIN_BUFFER_KIB = 1
"""The smallest ``-B`` tcpdump takes (libpcap rounds it up to one slot)."""

MAX_BACKLOG = 1 << 30
"""Bytes of tcpdump output read but not yet merged, at most (1 GiB: ~8 s of
a 1 Gbit/s stream the merge could not keep up with): past it the pump stops
reading (tcpdump then waits, the kernel drops, and the drops are counted
and reported: never silent)."""

_PUMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "livepump.py")

DRAIN_S = 5.0
"""Seconds a stop waits at most for tcpdump to hand over the packets it
had received when the stop was asked for (:meth:`LiveCapture._drain`):
the kernel's block timer takes up to 2 s, more on a loaded machine; the
wait ends as soon as they are there (at once when tcpdump is up to date)."""

RETIRE_S = 2.2
"""Seconds within which the kernel retires a TPACKET_V3 block that was open
(two ticks of tcpdump's 1 s block timeout, and a margin)."""

_PIPE_MAX = "/proc/sys/fs/pipe-max-size"
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)

# "123 packets captured", "1 packet dropped by kernel", on their own lines
# (closing statistics) or comma-separated after "tcpdump: " (SIGUSR1)
_STAT = re.compile(r"(\d+) packets? (captured|received by filter|dropped by kernel|"
                   r"dropped by interface)")
_STAT_KEYS = {"captured": "captured", "received by filter": "received_by_filter",
              "dropped by kernel": "dropped_kernel", "dropped by interface": "dropped_interface"}


def parse_stats(lines):
    """tcpdump's statistics from its standard error lines.

    Args:
        lines: iterable of str (tcpdump's stderr lines, in order).
    Returns: dict ``captured``, ``received_by_filter``, ``dropped_kernel``,
        ``dropped_interface`` (int; each the last value printed), or {} when
        tcpdump printed none.  tcpdump prints "dropped by interface" only
        when it is not zero: once any statistics were printed, a missing
        one is 0.
    """
    out = {}
    for line in lines:
        out = _add_stats(out, line)
    return out


def _add_stats(st, line):
    """``st`` (a :func:`parse_stats` dict) with tcpdump's stderr ``line``
    taken in: a new dict when the line has statistics, else ``st``."""
    found = _STAT.findall(line)
    if not found:
        return st
    # one report (closing lines come one per line: start afresh at
    # "captured" so a SIGUSR1 report's ifdrop does not linger)
    out = {} if "captured" in (k for _, k in found) else dict(st)
    for n, k in found:
        out[_STAT_KEYS[k]] = int(n)
    for k in _STAT_KEYS.values():
        out.setdefault(k, 0)
    return out


def _grow_pipe(f):
    """Make the pipe ``f`` as big as an unprivileged process may
    (``/proc/sys/fs/pipe-max-size``, 1 MiB by default; 64 KiB otherwise):
    room for ~700 full-size packets while the reader is busy."""
    try:
        with open(_PIPE_MAX) as m:
            size = int(m.read())
        fcntl.fcntl(f.fileno(), _F_SETPIPE_SZ, size)
    except (OSError, ValueError):
        pass


class LiveCapture:
    """A running tcpdump whose capture is read as a stream of events.

    Args:
        iface:    interface name ('any' for all: LINUX_SLL2 cooked headers).
        bpf:      capture filter (str) or None.
        count:    stop after this many packets (tcpdump -c) or None.
        duration: stop after this many seconds or None.
        snaplen:  bytes per packet, 0 = tcpdump's default (262144).
        quiet:    hide tcpdump's warnings (its messages are still used for
                  errors).
        buffer_size: tcpdump's ``-B``: KiB of kernel capture buffer (int
                  >= :data:`MIN_BUFFER_KIB`), None = :data:`DEFAULT_BUFFER_KIB`.
        immediate: tcpdump's ``--immediate-mode`` (each packet handed over
                  as it comes); False lets libpcap fill its ring block by
                  block (TPACKET_V3: packets packed, up to 1 s late).

    Attributes:
        reader: the capture reader (iterable of events) once started.
        ready:  True once tcpdump said it is listening (it captures, and
                takes SIGUSR1).

    Raises (from :meth:`start`, :meth:`check`):
        UnusableInput: tcpdump missing, no permission, unknown interface,
                       bad filter, a failure mid-capture (one line, what
                       to do).
    """

    def __init__(self, iface, bpf=None, count=None, duration=None, snaplen=0, quiet=False,
                 buffer_size=None, immediate=False):
        self.iface = iface
        self.bpf = bpf
        self.count = count
        self.duration = duration
        self.snaplen = snaplen
        self.quiet = quiet
        self.buffer_size = DEFAULT_BUFFER_KIB if buffer_size is None else int(buffer_size)
        self.immediate = immediate
        if self.buffer_size < MIN_BUFFER_KIB:
            raise UnusableInput(f"capture buffer of {self.buffer_size} KiB: "
                                f"-B takes at least {MIN_BUFFER_KIB}")
        self.proc = None
        self.reader = None
        self.ready = False
        self.pump = None
        self._timer = None
        self._old = {}
        self._stderr = []       # tcpdump's messages (not its statistics)
        self._stats = {}        # its last statistics (parse_stats)
        self._reports = 0       # statistics lines seen
        self._stderr_thread = None
        self.stopped = False
        self._pump_peak = 0
        self._stop_received = None

    def command(self):
        """The tcpdump command line (list of str)."""
        exe = shutil.which("tcpdump")
        if exe is None:
            raise UnusableInput("live capture needs tcpdump: apt-get install tcpdump")
        cmd = [exe, "-i", self.iface, "-U", "-w", "-",
               "-s", str(self.snaplen or 262144), "-B", str(self.buffer_size)]
        if self.immediate:
            cmd.insert(3, "--immediate-mode")
        if self.iface == "any":
            cmd += ["-y", "LINUX_SLL2"]
        if self.count:
            cmd += ["-c", str(self.count)]
        if self.bpf:
            cmd.append(self.bpf)
        return cmd

    def start(self):
        """Start tcpdump and open its output.  Returns the reader."""
        cmd = self.command()
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise UnusableInput(f"cannot run tcpdump: {e.strerror or e}") from None
        self._start_pump()
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True,
                                               name="pcapgro-live-stderr")
        self._stderr_thread.start()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                if signal.getsignal(sig) != signal.SIG_IGN:     # nohup: stays ignored
                    self._old[sig] = signal.signal(sig, self._on_signal)
            except ValueError:      # not the main thread
                pass
        if self.duration:
            self._timer = threading.Timer(self.duration, self.stop)
            self._timer.daemon = True
            self._timer.start()
        try:
            self.reader = open_reader_file(self.pump.stdout, f"tcpdump -i {self.iface}")
        except UnusableInput:
            self.close()
            raise UnusableInput(self._error_line()) from None
        return self.reader

    def _start_pump(self):
        """tcpdump's stdout -> pump process -> ``self.pump.stdout`` (read
        by the capture reader); pipes as large as allowed."""
        _grow_pipe(self.proc.stdout)
        try:
            # bufsize=0: a raw pipe, whose readinto returns what is there
            # (a BufferedReader's waits until the reader's chunk is full)
            self.pump = subprocess.Popen([sys.executable, "-s", "-E", _PUMP, str(MAX_BACKLOG)],
                                         stdin=self.proc.stdout, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True,
                                         bufsize=0)
        except OSError as e:
            self.proc.stdout.close()
            self.close()
            raise UnusableInput(f"cannot run {sys.executable}: {e.strerror or e}") from None
        self.proc.stdout.close()    # the pump's now: EOF reaches it when tcpdump ends
        _grow_pipe(self.pump.stdout)

    def _drain_stderr(self):
        # kept, not echoed: errors become one line of pcapgro's, the
        # statistics go to the table, warnings are shown at the end
        for line in self.proc.stderr:
            text = line.decode("utf-8", "replace").rstrip()
            st = _add_stats(self._stats, text)
            if st is not self._stats:
                self._stats = st
                self._reports += 1
                continue
            self._stderr.append(text)
            if "listening on" in text:
                self.ready = True

    def _messages(self):
        """tcpdump's lines that are neither "listening on" nor statistics."""
        return [s for s in self._stderr if s.strip() and "listening on" not in s]

    def _error_line(self):
        self.proc.wait()
        if self._stderr_thread is not None:
            self._stderr_thread.join(timeout=2)
        msg = " ".join(s.strip() for s in self._messages())
        if msg.startswith("tcpdump: "):
            msg = msg[len("tcpdump: "):]
        low = msg.lower()
        if "permission" in low or "operation not permitted" in low:
            return (f"no permission to capture on {self.iface}: run as root or give tcpdump "
                    f"CAP_NET_RAW ({msg})")
        if "no such device" in low or "doesn't exist" in low or "no such" in low:
            return f"unknown interface {self.iface!r} (see 'ip link'): tcpdump says: {msg}"
        if "syntax error" in low or "expression" in low:
            return f"bad capture filter {self.bpf!r}: {msg}"
        return f"tcpdump failed: {msg or 'exit status %s' % self.proc.returncode}"

    def statistics(self):
        """What tcpdump counted (:func:`parse_stats`): ``captured``,
        ``received_by_filter``, ``dropped_kernel``, ``dropped_interface``
        (int), the last report so far (all when tcpdump has ended), plus
        ``lost_at_stop`` (received before a stop was asked for and never
        handed over, see :meth:`_drain`), ``buffer_kib`` (the ``-B`` used)
        and ``backlog_peak`` (most bytes read from tcpdump and not yet
        merged).  Before any report tcpdump's counts are None."""
        st = self._stats
        out = {k: st.get(k) for k in _STAT_KEYS.values()}
        out["lost_at_stop"] = 0
        if self._stop_received is not None and out["captured"] is not None:
            out["lost_at_stop"] = max(0, self._stop_received - out["captured"]
                                      - out["dropped_kernel"])
        out["buffer_kib"] = self.buffer_size
        out["backlog_peak"] = self._pump_peak
        return out

    def lost(self):
        """Packets lost so far: dropped by the kernel or the interface (as
        tcpdump reported), and lost at the stop (int)."""
        st = self.statistics()
        return ((st["dropped_kernel"] or 0) + (st["dropped_interface"] or 0)
                + st["lost_at_stop"])

    def warnings(self):
        """tcpdump's other messages of a capture that ended well (e.g.
        "WARNING: ..."), without its name: list of str (empty when
        ``quiet``)."""
        if self.quiet:
            return []
        return [m[len("tcpdump: "):] if m.startswith("tcpdump: ") else m
                for m in self._messages()]

    def request_stats(self):
        """Ask the running tcpdump for its statistics so far (SIGUSR1: it
        prints one line, which :meth:`statistics` then reads).  Only once
        it is listening (before, SIGUSR1 would end it); False when not
        asked."""
        p = self.proc
        if not self.ready or self.stopped or p is None or p.poll() is not None:
            return False
        try:
            os.kill(p.pid, signal.SIGUSR1)
        except OSError:
            return False
        return True

    def _on_signal(self, signum, frame):
        self.stop()

    def stop(self):
        """End the capture normally: returns at once; a thread lets tcpdump
        hand over what it has received (:meth:`_drain`), then SIGINT makes
        it flush and close the pipe.  Asked twice (a second Ctrl-C): SIGINT
        at once."""
        if self.stopped or not self.ready:
            self.stopped = True
            self._interrupt()
            return
        self.stopped = True
        threading.Thread(target=self._drain, daemon=True, name="pcapgro-live-stop").start()

    def _interrupt(self):
        p = self.proc
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGINT)
            except OSError:
                pass

    def _report(self, timeout=0.5):
        """SIGUSR1 to tcpdump and its statistics line (dict of
        :func:`parse_stats`), or None (no answer in ``timeout`` s)."""
        p = self.proc
        n = self._reports
        if p is None or p.poll() is not None:
            return None
        try:
            os.kill(p.pid, signal.SIGUSR1)
        except OSError:
            return None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._reports > n:
                return self._stats
            time.sleep(0.01)
        return None

    def _drain(self):
        """Before SIGINT: libpcap's ring (TPACKET_V3) hands packets over a
        block at a time, a block when full or when the kernel's retire
        timer (tcpdump's 1 s timeout) finds it still open on two ticks, and
        tcpdump drops the block being filled when it is interrupted.  So
        the count tcpdump had received when the stop was asked for is taken
        (SIGUSR1), and SIGINT waits (at most :data:`DRAIN_S` s) until that
        many were captured or dropped; packets received after it may stay
        behind (they came after the stop).  What was received before it and
        never came is counted in ``lost_at_stop``.  On loopback and 'any'
        the kernel counts the outgoing copy of every loopback packet, which
        libpcap drops: there the count cannot tell, and the wait is
        :data:`RETIRE_S` (every block open at the stop retired)."""
        try:
            first = self._report()
            if not first:
                return
            if self._counts_twice():
                self._wait_exit(RETIRE_S)
                return
            self._stop_received = first["received_by_filter"]
            end = time.monotonic() + DRAIN_S
            st = first
            while (st and st["captured"] + st["dropped_kernel"] < self._stop_received
                   and time.monotonic() < end):
                time.sleep(0.05)
                st = self._report()
        finally:
            self._interrupt()

    def _wait_exit(self, seconds):
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def _counts_twice(self):
        """tcpdump's "received by filter" counts loopback packets twice
        (``any``, or a loopback interface: IFF_LOOPBACK in sysfs)."""
        if self.iface == "any":
            return True
        try:
            with open(f"/sys/class/net/{self.iface}/flags") as f:
                return bool(int(f.read(), 16) & 0x8)
        except (OSError, ValueError):
            return False

    def close(self):
        """Reap tcpdump and restore signal handlers.  Returns tcpdump's exit
        status."""
        if self._timer is not None:
            self._timer.cancel()
        for sig, h in self._old.items():
            try:
                signal.signal(sig, h)
            except (ValueError, TypeError):
                pass
        self._old = {}
        p = self.proc
        if p is None:
            return 0
        if p.poll() is None:
            self.stop()
            try:
                p.wait(timeout=DRAIN_S + 5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._close_pump()
        if self._stderr_thread is not None:
            self._stderr_thread.join(timeout=2)
        return p.returncode

    def _close_pump(self):
        """Reap the pump (it ends at tcpdump's end of output) and read its
        peak backlog."""
        q = self.pump
        if q is None:
            return
        self.pump = None
        try:
            q.stdout.close()
        except OSError:
            pass
        q.stdout = None
        try:
            err = q.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired:
            q.kill()
            err = q.communicate()[1]
        m = re.search(rb"peak (\d+)", err or b"")
        if m:
            self._pump_peak = int(m.group(1))

    def check(self):
        """Raise UnusableInput when tcpdump failed (rather than being
        stopped or reaching its count)."""
        rc = self.close()
        if rc not in (0, None) and not self.stopped and not self.count:
            raise UnusableInput(self._error_line())
