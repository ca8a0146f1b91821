"""What a command imports and how it leaves the cyclic GC: its fixed cost.

A command's start-up is mostly imports, so each module a command does not
need stays out of it: these tests run the command in a fresh interpreter
and look at what it added to ``sys.modules`` (what the interpreter's own
start-up, ``site`` and an editable install's finder, imported before is not
counted).  Run as the program, a command freezes what its imports made
(:func:`gc.freeze`), so that no collection, the interpreter's at exit
included, walks it.  No timings: what is checked is what the time went
into.
"""

import ast
import json
import subprocess
import sys

import pytest

from capture_helpers import REPO, SAMPLES

# run as the console script runs it (pcapgro.cli:main, no argv), then say
# which modules the run added, the exit status and the cyclic GC's state
PROGRAM = """
import gc, sys
before = set(sys.modules)
sys.argv = ["pcapgro"] + {args!r}
from pcapgro.cli import main
try:
    main({argv})
except SystemExit as e:
    status = e.code
added = sorted(set(sys.modules) - before)
import json
sys.__stdout__.write(json.dumps({{"status": status, "added": added,
                                  "frozen": gc.get_freeze_count(),
                                  "gc": gc.isenabled()}}))
"""

# the standard library modules no merge needs (json: --stats only;
# urllib.parse and ipaddress: comments and split's flow names only), and
# pcapgro's own
NOT_FOR_MERGE = ("json", "urllib.parse", "ipaddress", "pcapgro.gso", "pcapgro.forward",
                 "pcapgro.verify", "pcapgro.calibrate", "pcapgro.agreement", "pcapgro.live",
                 "subprocess")


def run_program(*args, argv=None):
    """Run ``pcapgro ARGS`` as the console script does, in a new
    interpreter: the dict :data:`PROGRAM` prints."""
    code = PROGRAM.format(args=[str(a) for a in args],
                          argv="" if argv is None else repr([str(a) for a in argv]))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def added_by(statement):
    """Modules ``statement`` adds to ``sys.modules`` in a new interpreter."""
    code = ("import sys\nbefore = set(sys.modules)\n" + statement
            + "\nprint(repr(sorted(set(sys.modules) - before)))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO, check=True)
    return set(ast.literal_eval(p.stdout.decode().splitlines()[-1]))


def test_importing_the_cli_leaves_out_what_merge_does_not_need():
    added = added_by("import pcapgro.cli")
    assert "pcapgro.cli" in added and "click" in added
    assert not added & set(NOT_FOR_MERGE), sorted(added & set(NOT_FOR_MERGE))
    # the GRO engine comes with the job that runs it
    assert "pcapgro.gro" not in added


@pytest.mark.parametrize("out", ["o.pcap", "o.pcapng"])
def test_merge_imports_no_more_than_it_needs(tmp_path, out):
    r = run_program("merge", SAMPLES / "tcp4-bulk-wire.pcap", tmp_path / out)
    assert r["status"] == 0
    assert "pcapgro.gro" in r["added"]
    assert not set(r["added"]) & set(NOT_FOR_MERGE), sorted(set(r["added"]) & set(NOT_FOR_MERGE))


def test_merge_imports_what_its_options_need(tmp_path):
    r = run_program("merge", "-q", "--gso", "--stats", tmp_path / "s.json",
                    SAMPLES / "tcp4-bulk-wire.pcap", tmp_path / "o.pcap")
    assert r["status"] == 0
    assert {"pcapgro.gso", "pcapgro.forward", "json"} <= set(r["added"])
    assert json.loads((tmp_path / "s.json").read_text())["packets_in"] > 0


def test_split_imports_no_json(tmp_path):
    r = run_program("split", "-q", SAMPLES / "tcp4-tso-sender.pcap", tmp_path / "o.pcap")
    assert r["status"] == 0 and "pcapgro.gso" in r["added"]
    assert not {"json", "pcapgro.verify", "pcapgro.gro"} & set(r["added"])


def test_split_verify_ports_without_importing_gso_first():
    added = added_by("import pcapgro.jobs as j\n"
                     "assert j.SPLIT_VXLAN_PORTS == (4789, 8472), j.SPLIT_VXLAN_PORTS\n"
                     "assert j.SPLIT_GENEVE_PORTS == (6081,), j.SPLIT_GENEVE_PORTS")
    assert "pcapgro.gso.tunnel" in added


def test_the_program_freezes_what_its_imports_made(tmp_path):
    # run as the program: the imports' objects are out of the GC's sight
    # (neither the run's collections nor those at exit walk them)
    r = run_program("merge", "-q", SAMPLES / "udp4-fwd-wire.pcap", tmp_path / "o.pcap")
    assert r["status"] == 0 and r["frozen"] > 1000 and r["gc"]
    # called with argv (a test, a program of its own): its GC is left alone
    r = run_program(argv=["merge", "-q", SAMPLES / "udp4-fwd-wire.pcap", tmp_path / "p.pcap"])
    assert r["status"] == 0 and r["frozen"] == 0 and r["gc"]
