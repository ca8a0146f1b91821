"""pcapgro: rewrite packet captures the way Linux GRO and GSO do.

Library layout (the CLI in :mod:`pcapgro.cli` is a thin layer over these):

* :mod:`pcapgro.record`   -- the event objects every stage passes along
* :mod:`pcapgro.capture`  -- pcap / pcapng readers and writers
* :mod:`pcapgro.linklayer` -- link types down to the network layer
* :mod:`pcapgro.gro`      -- the GRO engine (NAPI model + protocol handlers)
"""

__version__ = "0.1.0"
