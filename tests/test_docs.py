"""The documentation a user relies on: the man page and README.

* Every option that ``--help`` prints (the group's and each command's)
  appears in the man page, a command's options in that command's own
  section.  The check is one way (--help is a subset of the man page), so the
  page may document options that are still being added to the CLI; an option
  added to the CLI without a man page entry fails here.
* ``groff -man -ww`` renders the page without warnings (and ``man -l``).
* README carries the two set-up commands verbatim, and the shell completion
  and manual sections.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MANPAGE = ROOT / "man" / "pcapgro.1"
README = ROOT / "README.md"

# The two set-up commands of README.md (issue 2), verbatim.
INSTALL_AND_RUN = ("python3 -m venv .venv && .venv/bin/pip install . && "
                   ".venv/bin/pcapgro merge samples/tcp4-bulk-wire.pcap /tmp/gro.pcapng")
INSTALL_AND_TEST = ("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && "
                    ".venv/bin/python -m pytest -q")


# --- click's --help output -------------------------------------------------

def _help(*args):
    """``pcapgro ARGS --help`` as the user sees it (wide terminal, so that
    option names and their help are on one line where they fit)."""
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "pcapgro.cli", *args, "--help"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"pcapgro {' '.join(args)} --help failed:\n{r.stderr}"
    return r.stdout


def _help_sections(text):
    """{heading: [entry lines]} of a click help page.  Headings are the
    unindented lines ending in ':' ("Options:", "Commands:"); entries are the
    lines indented by exactly two spaces (continuation lines of wrapped help
    text are indented further)."""
    sections = {}
    cur = None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            cur = line.strip()[:-1]
            sections[cur] = []
        elif cur is not None and re.match(r"  \S", line):
            sections[cur].append(line[2:])
    return sections


_OPT = re.compile(r"(?:^|[,/]\s*)(--?[A-Za-z0-9][\w-]*)")


def help_options(text):
    """Every option name (short and long, also a '/ --no-x' secondary form)
    listed under "Options:" in click help output."""
    names = []
    for entry in _help_sections(text).get("Options", []):
        if not entry.startswith("-"):
            continue
        spec = re.split(r"\s{2,}", entry, maxsplit=1)[0]
        found = _OPT.findall(spec)
        assert found, f"cannot parse option line {entry!r}"
        names.extend(found)
    return names


def help_commands(text):
    return [e.split()[0] for e in _help_sections(text).get("Commands", []) if e.strip()]


def test_help_parser():
    """The parser on click's layouts: short+long, metavars, choices, wrapped
    help text that contains dashes, boolean flag pairs."""
    text = ("Usage: x [OPTIONS]\n\nOptions:\n"
            "  -q, --quiet              No progress bar.\n"
            "  -F [pcap|pcapng]         Output format.\n"
            "  --gro-max-size BYTES     Aggregates stay below it; -1 is\n"
            "                           --not-an-option here.\n"
            "  --color / --no-color     Colours.\n"
            "  --a-very-long-option-name-that-takes-the-whole-column TEXT\n"
            "                           Help on the next line.\n"
            "  -h, --help               Show this message and exit.\n"
            "\nCommands:\n  merge  Merge.\n  split  Split...\n")
    assert help_options(text) == ["-q", "--quiet", "-F", "--gro-max-size", "--color",
                                  "--no-color",
                                  "--a-very-long-option-name-that-takes-the-whole-column",
                                  "-h", "--help"]
    assert help_commands(text) == ["merge", "split"]


# --- the man page ----------------------------------------------------------

def _man_plain(roff):
    """The roff source as plain text for option lookup: comments dropped,
    font escapes removed, \\- as -."""
    out = []
    for line in roff.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        line = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", line)
        line = line.replace("\\-", "-").replace("\\&", "").replace("\\~", " ")
        line = line.replace("\\%", "")
        out.append(line)
    return "\n".join(out)


def man_sections():
    """{SECTION HEADING: text} of the man page (``.SH`` sections)."""
    sections = {}
    cur = None
    for line in _man_plain(MANPAGE.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"\.SH\s+(.*)", line)
        if m:
            cur = m.group(1).strip().strip('"')
            sections[cur] = []
        elif cur is not None:
            sections[cur].append(line)
    return {k: "\n".join(v) for k, v in sections.items()}


def _mentions(text, opt):
    """``opt`` occurs in ``text`` as a whole option name (--gro is not found
    in --gro-max-size, -s not in -sX)."""
    return re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", text) is not None


def test_man_page_has_the_required_sections():
    have = man_sections()
    for name in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS",
                 "OUTPUT FORMATS", "EXAMPLES", "SEE ALSO", "NOTES", "AUTHORS"):
        assert name in have, f"man page has no {name} section"
    for ref in ("tcpdump (1)", "editcap (1)", "tcprewrite (1)", "tshark (1)", "ethtool (8)"):
        assert re.search(r"\.BR\s+" + re.escape(ref), have["SEE ALSO"].replace("  ", " ")), \
            f"SEE ALSO lacks {ref}"
    for status in ("0", "1", "2", "3", "130"):
        assert re.search(r"^\.B " + status + r"$", have["EXIT STATUS"], re.M), \
            f"EXIT STATUS lacks {status}"


def test_group_options_are_in_the_man_page():
    text = _help()
    opts = help_options(text)
    assert "--version" in opts and "--help" in opts
    man = man_sections()["OPTIONS"]
    missing = [o for o in opts if not _mentions(man, o)]
    assert not missing, f"man page OPTIONS does not describe: {missing}"


def test_every_command_has_a_man_section_with_its_options():
    """Each command listed by ``pcapgro --help`` has a section named after
    it (MERGE, SPLIT, VERIFY...), and every option its --help prints is
    named there (the section may refer to COMMON OPTIONS / LIVE INPUT for the
    description, but must name the option)."""
    commands = help_commands(_help())
    assert "merge" in commands and "split" in commands
    sections = man_sections()
    synopsis = sections["SYNOPSIS"]
    problems = []
    for cmd in commands:
        if not re.search(r"^\.B " + cmd + r"\b", synopsis, re.M):
            problems.append(f"SYNOPSIS has no 'pcapgro {cmd}'")
        sec = sections.get(cmd.upper())
        if sec is None:
            problems.append(f"no .SH {cmd.upper()} section for command {cmd}")
            continue
        for opt in help_options(_help(cmd)):
            if not _mentions(sec, opt):
                problems.append(f"{cmd} {opt} is not in the man page's {cmd.upper()} section")
    assert not problems, "\n".join(problems)


def test_shared_options_are_described():
    """Options that the command sections only name are described (as .TP
    items) in COMMON OPTIONS or LIVE INPUT."""
    sections = man_sections()
    described = set()
    for name in ("COMMON OPTIONS", "LIVE INPUT"):
        for tag in re.findall(r"^\.TP\n\.[BI]R?\w*\s+(\S+)", sections[name], re.M):
            described.add(tag)
    for opt in ("-q", "-F", "--stats", "--verify", "-i", "-f", "-c", "--duration", "-s"):
        assert opt in described, f"{opt} has no .TP entry in COMMON OPTIONS / LIVE INPUT"


def _groff_warnings(args, env=None):
    r = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.skipif(shutil.which("groff") is None,
                    reason="groff not installed (apt-get install -y groff)")
def test_groff_renders_without_warnings():
    rc, _, err = _groff_warnings(["groff", "-man", "-ww", "-z", str(MANPAGE)])
    assert rc == 0 and err == "", f"groff -man -ww:\n{err}"
    # also the terminal rendering man(1) uses, in the C locale
    rc, _, err = _groff_warnings(["groff", "-man", "-ww", "-Tascii", "-z", str(MANPAGE)],
                                 env=dict(os.environ, LC_ALL="C"))
    assert rc == 0 and err == "", f"groff -Tascii -man -ww:\n{err}"


@pytest.mark.skipif(shutil.which("man") is None or shutil.which("groff") is None,
                    reason="man-db / groff not installed (apt-get install -y man-db groff)")
def test_man_l_renders():
    env = dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80")
    rc, out, err = _groff_warnings(["man", "--warnings", "-l", str(MANPAGE)], env=env)
    assert rc == 0, err
    assert err == "", f"man --warnings -l:\n{err}"
    assert "NAME" in out and "pcapgro" in out and "EXIT STATUS" in out



def _installed_manpage():
    """The manual page the installed pcapgro distribution (this venv's,
    editable or not) put under <prefix>/share/man/man1, or skip when
    pcapgro runs from a checkout that pip did not install."""
    from importlib import metadata
    # pip's install has a RECORD (a checkout's own pcapgro.egg-info, first
    # on sys.path when pytest runs from the checkout, has none)
    dists = [d for d in metadata.distributions(name="pcapgro") if d.read_text("RECORD")]
    if not dists:
        pytest.skip("pcapgro is not pip-installed here (run from a checkout)")
    dist = dists[0]
    files = [f for f in dist.files if f.as_posix().endswith("share/man/man1/pcapgro.1")]
    assert files, "the installed pcapgro lists no share/man/man1/pcapgro.1 (setup.py data_files)"
    return Path(dist.locate_file(files[0])).resolve()


def test_install_puts_the_manual_where_man_finds_it():
    """``pip install`` (editable too) installs man/pcapgro.1 into the
    prefix's share/man/man1 (issue 19, item 2)."""
    page = _installed_manpage()
    assert page.is_file(), page
    assert page.parent == (Path(sys.prefix) / "share" / "man" / "man1").resolve()
    assert "\n.TH PCAPGRO 1 " in page.read_text(encoding="utf-8")[:2000]


@pytest.mark.skipif(shutil.which("man") is None, reason="man (man-db) not installed")
def test_man_finds_the_installed_page_with_the_venv_bin_on_path(tmp_path):
    """``man pcapgro`` with only the venv's bin/ on PATH (no MANPATH):
    man-db derives <prefix>/share/man from PATH."""
    page = _installed_manpage()
    env = {k: v for k, v in os.environ.items() if k not in ("MANPATH", "MANOPT")}
    env["PATH"] = os.pathsep.join([str(Path(sys.prefix) / "bin"), "/usr/bin", "/bin"])
    env["HOME"] = str(tmp_path)         # no ~/.manpath
    r = subprocess.run(["man", "-w", "pcapgro"], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).resolve() == page


# --- README ----------------------------------------------------------------

def test_readme_has_the_setup_commands_verbatim():
    text = README.read_text(encoding="utf-8")
    assert INSTALL_AND_RUN in text
    assert INSTALL_AND_TEST in text


def test_readme_has_shell_completion_and_manual():
    text = README.read_text(encoding="utf-8")
    assert "## Shell completion" in text
    for shell in ("bash", "zsh", "fish"):
        assert f"_PCAPGRO_COMPLETE={shell}_source pcapgro" in text
    assert "## Manual" in text
    assert "man -l man/pcapgro.1" in text


# --- the statistics schema --------------------------------------------------

def _readme_statistics():
    text = README.read_text(encoding="utf-8")
    start = text.index("### Statistics")
    return text[start:text.index("\n#", start + 1)]


def test_statistics_keys_are_documented():
    """Every key merge writes under ``gro`` (with the fixed keys of
    ``checksums`` and ``by_kind``) is named in README's Statistics section,
    and every key of ``merge --gso``'s ``forward`` there and in the man
    page (MERGE section)."""
    from pcapgro.forward import ForwardStats
    from pcapgro.gro.stats import CHECKSUM_KEYS, KINDS, GROStats
    readme = _readme_statistics()
    gro = GROStats().to_dict()
    assert set(gro["checksums"]) == set(CHECKSUM_KEYS)
    assert set(gro["by_kind"]) == set(KINDS)
    keys = (list(gro) + list(gro["segments_per_aggregate"]) + list(gro["snaplen"])
            + list(CHECKSUM_KEYS) + list(KINDS) + ["forward", *ForwardStats.FIELDS])
    missing = [k for k in keys if f"`{k}`" not in readme]
    assert not missing, f"README's Statistics section does not name: {missing}"
    merge = man_sections()["MERGE"]
    missing = [k for k in ("forward", *ForwardStats.FIELDS)
               if not re.search(r"^\.BR? " + k + r"\b", merge, re.M)]
    assert not missing, f"the man page's MERGE section does not name: {missing}"
