"""A helper process for bulk loads: splits documents into passages and
shingles them while the loading process runs its SQL.

Run as ``python -m memors_core.engine._shingle_worker``; it reads length-prefixed
pickled lists of documents on stdin (each its text, and whether it names
entities: then each of its passages gets its substitution profile) and
answers each with the pickled ``prepare_passages`` results on stdout, until
stdin closes. It is a plain
subprocess, not ``multiprocessing``, so it never re-imports the caller's
``__main__``.
"""

from __future__ import annotations

import pickle
import struct
import sys

HEADER = struct.Struct("<Q")


def read_frame(stream) -> bytes | None:
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        return None
    return data


def write_frame(stream, data: bytes) -> None:
    stream.write(HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def main() -> None:
    from memors_core.engine.prepare import prepare_passages
    from memors_core.settings import Limits

    # The loading process refuses a document of too many passages: it is
    # split, never shingled (the limit comes from the same environment).
    limit = Limits().passages_per_document
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (frame := read_frame(stdin)) is not None:
        documents = pickle.loads(frame)
        ready = [prepare_passages(t, limit, profiles=True, named=n) for t, n in documents]
        write_frame(stdout, pickle.dumps(ready, protocol=5))


if __name__ == "__main__":
    main()
