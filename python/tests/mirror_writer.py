"""A Python mirror writer for the kill test (test_claude_agent_sdk.py): appends one entry a call
to a ThreadlineSessionStore (a batch of two every tenth), printing `ACK <n>` after each append
returns, until it is SIGKILLed. argv: store, session id."""

import asyncio
import sys

from threadline import Store
from threadline.claude_agent_sdk import ThreadlineSessionStore


def entry(session_id: str, i: str) -> dict:
    return {"type": "user", "uuid": f"{session_id}-{i}", "sessionId": session_id,
            "timestamp": "2026-11-27T18:40:06.000Z", "message": {"role": "user", "content": f"m{i}"}}


async def main() -> None:
    store = Store.open(sys.argv[1])
    sid = sys.argv[2]
    sessions = ThreadlineSessionStore(store)
    key = {"project_key": "p", "session_id": sid}
    i = 0
    while True:
        batch = [entry(sid, f"{i}a"), entry(sid, f"{i}b")] if i % 10 == 9 else [entry(sid, str(i))]
        await sessions.append(key, batch)  # type: ignore[arg-type]
        print(f"ACK {i}", flush=True)
        i += 1


asyncio.run(main())
