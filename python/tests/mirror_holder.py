"""A process holding mirrored sessions (test_claude_agent_sdk.py): each stdin line is a JSON
command {op: append|delete|close, key?, entries?}, answered with `OK` or `ERR <code>` once done."""

import asyncio
import json
import sys

from threadline import Store, ThreadlineError
from threadline.claude_agent_sdk import ThreadlineSessionStore


async def main() -> None:
    store = Store.open(sys.argv[1])
    sessions = ThreadlineSessionStore(store)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["op"] == "append":
                await sessions.append(cmd["key"], cmd["entries"])
            elif cmd["op"] == "delete":
                await sessions.delete(cmd["key"])
            elif cmd["op"] == "close":
                store.close()
            print("OK", flush=True)
        except ThreadlineError as e:
            print(f"ERR {e.code}", flush=True)


asyncio.run(main())
