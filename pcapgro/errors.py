"""Errors pcapgro raises, each tied to an exit status of the CLI contract.

Exit status (every command): 0 done; 1 differences found (verify);
2 usage error or unusable input; 3 input damaged part-way (everything
before the damage was written); 130 interrupted while reading a file;
143 terminated by SIGTERM while reading a file (128 + 15, as a shell
reports it; partial output removed as for 130).
"""

__all__ = ["PcapgroError", "UnusableInput", "DamagedInput", "EXIT_OK",
           "EXIT_DIFFER", "EXIT_USAGE", "EXIT_DAMAGED", "EXIT_INTERRUPTED",
           "EXIT_TERMINATED"]

EXIT_OK = 0
EXIT_DIFFER = 1
EXIT_USAGE = 2
EXIT_DAMAGED = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class PcapgroError(Exception):
    """Base class: a one-line message for the user and an exit status."""

    exit_status = EXIT_USAGE


class UnusableInput(PcapgroError):
    """The input cannot be used at all (unreadable, unrecognised format,
    refused conversion, missing tool).  Exit status 2."""

    exit_status = EXIT_USAGE


class DamagedInput(PcapgroError):
    """The input is damaged part-way: everything before ``offset`` was
    yielded; the reader stops here.  Exit status 3.

    Attributes:
        offset:  byte offset in the input where the damage starts.
        problem: short description ("truncated record", ...).
    """

    exit_status = EXIT_DAMAGED

    def __init__(self, offset, problem):
        self.offset = offset
        self.problem = problem
        super().__init__(f"damaged input at byte offset {offset}: {problem}")
