"""A Python writer for the kill test (test_processes.py): appends messages to a new session
forever, printing `ACK <seq> <uuid>` after each append returns, until it is SIGKILLed."""

import sys

from threadline import Store

store = Store.open(sys.argv[1])
session = store.create_session(project="kill")
print("SESSION " + session.id, flush=True)
i = 0
while True:
    role = "user" if i % 2 == 0 else "assistant"
    msg = {"role": role, "content": [{"type": "text", "text": f"message {i}"}], "i": i, "big": 10**30 + i}
    filled = session.append(msg)
    print(f"ACK {filled['seq']} {filled['uuid']}", flush=True)
    i += 1
