"""Live interface input: packets from a capture program, through a pipe.

pcapgro does not open raw sockets of its own: it runs ``tcpdump`` (libpcap,
the most widely installed and best-kept capture engine; it takes BPF
filters, snaplen, counts, ``-i any``, and writes classic pcap to a pipe
with ``-U``, packet-buffered) and reads its standard output with the same
reader as a file (:func:`pcapgro.capture.open_reader_file`), so a live
capture goes through exactly the pipeline a file does.

Stopping: Ctrl-C (SIGINT), SIGTERM or SIGHUP to pcapgro is forwarded to tcpdump,
which ends its capture and closes the pipe; pcapgro then reads to the end,
flushes what GRO holds, writes complete output and exits 0.  ``duration``
stops tcpdump the same way after that many seconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading

from .capture import open_reader_file
from .errors import UnusableInput

__all__ = ["LiveCapture"]


class LiveCapture:
    """A running tcpdump whose capture is read as a stream of events.

    Args:
        iface:    interface name ('any' for all: LINUX_SLL2 cooked headers).
        bpf:      capture filter (str) or None.
        count:    stop after this many packets (tcpdump -c) or None.
        duration: stop after this many seconds or None.
        snaplen:  bytes per packet, 0 = tcpdump's default (262144).
        quiet:    hide tcpdump's own messages (they are still used for errors).

    Attributes:
        reader: the capture reader (iterable of events) once started.

    Raises (from :meth:`start`):
        UnusableInput: tcpdump missing, no permission, unknown interface,
                       bad filter (one line, what to do).
    """

    def __init__(self, iface, bpf=None, count=None, duration=None, snaplen=0, quiet=False):
        self.iface = iface
        self.bpf = bpf
        self.count = count
        self.duration = duration
        self.snaplen = snaplen
        self.quiet = quiet
        self.proc = None
        self.reader = None
        self._timer = None
        self._old = {}
        self.stopped = False

    def command(self):
        """The tcpdump command line (list of str)."""
        exe = shutil.which("tcpdump")
        if exe is None:
            raise UnusableInput("live capture needs tcpdump: apt-get install tcpdump")
        cmd = [exe, "-i", self.iface, "-U", "--immediate-mode", "-w", "-",
               "-s", str(self.snaplen or 262144)]
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
        self._stderr = []
        t = threading.Thread(target=self._drain_stderr, daemon=True)
        t.start()
        self._stderr_thread = t
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
            self.reader = open_reader_file(self.proc.stdout, f"tcpdump -i {self.iface}")
        except UnusableInput:
            self.close()
            raise UnusableInput(self._error_line()) from None
        return self.reader

    def _drain_stderr(self):
        for line in self.proc.stderr:
            text = line.decode("utf-8", "replace").rstrip()
            self._stderr.append(text)
            if not self.quiet and not text.startswith(("listening on", "tcpdump: listening")):
                try:
                    os.write(2, (f"tcpdump: {text}\n" if not text.startswith("tcpdump:")
                                 else text + "\n").encode())
                except OSError:
                    pass

    def _error_line(self):
        self.proc.wait()
        self._stderr_thread.join(timeout=2)
        msg = " ".join(s for s in self._stderr if s and not s.startswith("listening on")).strip()
        low = msg.lower()
        if "permission" in low or "operation not permitted" in low:
            return (f"no permission to capture on {self.iface}: run as root or give tcpdump "
                    f"CAP_NET_RAW ({msg})")
        if "no such device" in low or "doesn't exist" in low or "no such" in low:
            return f"unknown interface {self.iface!r} (see 'ip link') ({msg})"
        if "syntax error" in low or "expression" in low:
            return f"bad capture filter {self.bpf!r}: {msg}"
        return f"tcpdump failed: {msg or 'exit status %s' % self.proc.returncode}"

    def _on_signal(self, signum, frame):
        self.stop()

    def stop(self):
        """End the capture normally: tcpdump flushes and closes the pipe."""
        self.stopped = True
        p = self.proc
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGINT)
            except OSError:
                pass

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
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        try:
            p.stdout.close()
        except OSError:
            pass
        self._stderr_thread.join(timeout=2)
        return p.returncode

    def check(self):
        """Raise UnusableInput when tcpdump failed (rather than being
        stopped or reaching its count)."""
        rc = self.close()
        if rc not in (0, None) and not self.stopped and not self.count:
            raise UnusableInput(self._error_line())
