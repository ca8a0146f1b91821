"""Errors pcapgro raises, each tied to an exit status of the CLI contract.

Exit status (every command): 0 done; 1 differences found (verify);
2 usage error or unusable input; 3 input damaged part-way (everything
before the damage was written); 4 packets lost by a live capture (the
kernel or the interface dropped some: the output is complete for what
tcpdump captured; 3 wins when both happen); 130 interrupted while reading a file;
141 OUT closed by its reader (128 + SIGPIPE, as editcap ends); 143
terminated by SIGTERM while reading a file (128 + 15, as a shell reports
it; partial output removed as for 130).
"""

__all__ = ["PcapgroError", "UnusableInput", "OptionError", "DamagedInput", "OutputClosed",
           "EXIT_OK", "EXIT_DIFFER", "EXIT_USAGE", "EXIT_DAMAGED", "EXIT_LOST", "EXIT_INTERRUPTED",
           "EXIT_PIPE", "EXIT_TERMINATED"]

EXIT_OK = 0
EXIT_DIFFER = 1
EXIT_USAGE = 2
EXIT_DAMAGED = 3
EXIT_LOST = 4
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141
EXIT_TERMINATED = 143


class PcapgroError(Exception):
    """Base class: a one-line message for the user and an exit status."""

    exit_status = EXIT_USAGE


class UnusableInput(PcapgroError):
    """The input cannot be used at all (unreadable, unrecognised format,
    refused conversion, missing tool).  Exit status 2."""

    exit_status = EXIT_USAGE


class OptionError(UnusableInput):
    """Options that do not go together, or a job that cannot be set up as
    asked (OUT naming IN, ``--verify`` on standard output, an unknown value
    given to the library).  Exit status 2; the CLI shows it as a usage
    error (``Usage: ...`` and ``Error: MESSAGE``)."""


class OutputClosed(PcapgroError):
    """OUT was closed by its reader (EPIPE: ``pcapgro merge IN - | head``):
    the reader had enough.  Not a failure: the CLI writes the statistics
    and exits 141 (128 + SIGPIPE, as editcap ends) without a message.

    Attributes:
        report: the statistics of what was handed to OUT before the pipe
                closed (a :class:`pcapgro.jobs.Report`), or None.
    """

    exit_status = EXIT_PIPE

    def __init__(self, report=None):
        self.report = report
        super().__init__("output closed (broken pipe)")


class DamagedInput(PcapgroError):
    """The input is damaged part-way: everything before ``offset`` was
    yielded; the reader stops here.  Exit status 3.

    Attributes:
        offset:  byte offset in the input where the damage starts.
        problem: short description ("truncated record", ...).
        report:  set by :mod:`pcapgro.jobs` when a whole job stopped here:
                 the statistics of what was written (OUT is complete up
                 to the damage); None otherwise.
    """

    exit_status = EXIT_DAMAGED
    report = None

    def __init__(self, offset, problem):
        self.offset = offset
        self.problem = problem
        super().__init__(f"damaged input at byte offset {offset}: {problem}")
