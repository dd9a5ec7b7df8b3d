"""A checkpointing loop for the kill test (test_checkpoint.py): saves {"step": i, ...} under one
key, printing `SAVED <i>` after each save returns, until it is SIGKILLed. argv: store."""

import sys

from threadline import Store
from threadline.checkpoint import SnapshotCheckpoints

checkpoints = SnapshotCheckpoints(Store.open(sys.argv[1]))
i = 0
while True:
    checkpoints.save("loop", {"step": i, "big": 10**40 + i, "history": list(range(i % 50))})
    print(f"SAVED {i}", flush=True)
    i += 1
