"""Runs the real Claude Code (the `claude` binary the claude-agent-sdk wheel brings) through
`query()` with a ThreadlineSessionStore as its session_store, against the loopback model server
(ANTHROPIC_BASE_URL and CLAUDE_CONFIG_DIR come from the environment). argv[1]: JSON
{store, prompt, cwd, resume?, flush?}. Prints each SDK message's type, subtype and session id
as one JSON line (test_claude_agent_sdk.py reads them)."""

import asyncio
import json
import sys

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, SystemMessage, query

from threadline import Store
from threadline.claude_agent_sdk import ThreadlineSessionStore

job = json.loads(sys.argv[1])


async def main() -> None:
    with Store.open(job["store"]) as store:
        options = ClaudeAgentOptions(
            cwd=job["cwd"],
            model="claude-sonnet-4-5",
            # as root Claude Code refuses bypassPermissions: name the tools it may use instead
            allowed_tools=["Bash"],
            setting_sources=[],
            session_store=ThreadlineSessionStore(store),
            session_store_flush=job.get("flush", "batched"),
            resume=job.get("resume"),
        )
        async for message in query(prompt=job["prompt"], options=options):
            line = {"kind": type(message).__name__}
            if isinstance(message, SystemMessage):
                line.update(subtype=message.subtype, session_id=message.data.get("session_id"))
            if isinstance(message, ResultMessage):
                line.update(subtype=message.subtype, session_id=message.session_id, result=message.result)
            print(json.dumps(line), flush=True)


asyncio.run(main())
