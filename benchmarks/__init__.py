"""The benchmark harnesses (see docs/performance.md).

They measure the store as it ranks by words: where the ``semantic`` extra
is installed (the dev set-up has it), remembering would also embed every
passage, which is search by meaning's cost, measured by
``benchmarks/retrieval.py`` alone. So ``MEMORS_VECTORS`` is ``off`` for
every harness unless the environment sets it, and retrieval.py turns it on
(``--no-vectors`` keeps it off).
"""

import os

#: Whether MEMORS_VECTORS was left to the harnesses (not set by the caller).
VECTORS_DEFAULTED = "MEMORS_VECTORS" not in os.environ
os.environ.setdefault("MEMORS_VECTORS", "off")
