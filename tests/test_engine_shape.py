"""The GRO engine's shape (issue 16): an engine core that knows no
protocol, protocols found through the offload table, small functions."""

import ast
import pathlib

import pcapgro.gro as gro
from pcapgro.gro import offload

GRO = pathlib.Path(gro.__file__).parent
PROTOCOLS = {"ipv4", "ipv6", "tcp", "udp", "gre", "ipip", "udp_tunnel"}
CORE = ("core.py", "complete.py", "annotate.py", "payload.py", "offload.py")


def _imports(path):
    names = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom):
            mod = (n.module or "").split(".")[-1]
            names.add(mod)
            names.update(a.name for a in n.names)
        elif isinstance(n, ast.Import):
            names.update(a.name.split(".")[-1] for a in n.names)
    return names


def test_core_imports_no_protocol_module():
    for name in CORE:
        assert not _imports(GRO / name) & PROTOCOLS, f"{name} imports a protocol module"


def test_protocols_registered_in_the_offload_table():
    assert {offload.l3_offload(4).name, offload.l3_offload(6).name} == {"ipv4", "ipv6"}
    assert offload.inet_offload(6).name == "tcp"
    assert offload.inet_offload(17).name == "udp"
    assert offload.inet_offload(47).name == "gre"
    assert offload.inet_offload(4).name == offload.inet_offload(41).name == "ipip"
    assert offload.inet_offload(17).tunnel is not None      # VXLAN, Geneve sockets
    assert offload.inet_offload(50) is None


def test_no_function_over_80_lines():
    long = []
    for path in sorted(GRO.glob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if n.end_lineno - n.lineno + 1 > 80:
                    long.append(f"{path.name}:{n.name}")
    assert not long, f"functions over 80 lines: {long}"
