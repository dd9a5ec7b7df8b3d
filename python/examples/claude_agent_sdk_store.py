"""Claude Code's sessions kept in Threadline: the Claude Agent SDK mirrors every transcript line
into the store, and resumes from it on another machine (checked by mypy --strict in
tests/test_types.py).

    python examples/claude_agent_sdk_store.py agent.db "What is in this folder?"
"""

from __future__ import annotations

import asyncio
import sys
from typing import Optional

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

from threadline import Store
from threadline.checkpoint import SnapshotCheckpoints
from threadline.claude_agent_sdk import ThreadlineSessionStore


async def ask(store: Store, prompt: str, resume: Optional[str]) -> Optional[str]:
    options = ClaudeAgentOptions(session_store=ThreadlineSessionStore(store), resume=resume)
    session_id: Optional[str] = None
    async for message in query(prompt=prompt, options=options):
        if isinstance(message, ResultMessage):
            print(message.result)
            session_id = message.session_id
    return session_id


def main(path: str, prompt: str) -> None:
    with Store.open(path) as store:
        checkpoints = SnapshotCheckpoints(store)
        last = checkpoints.load("claude-session")
        resume = last["session_id"] if isinstance(last, dict) else None
        session_id = asyncio.run(ask(store, prompt, resume))
        if session_id is not None:
            checkpoints.save("claude-session", {"session_id": session_id})
            with store.open_session(session_id) as session:
                print(f"{len(session.messages)} messages, {len(session.turns)} turns")
                print(session.export("markdown")[:500])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
