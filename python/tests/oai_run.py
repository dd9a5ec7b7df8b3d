"""A process running the OpenAI Agents SDK (Runner.run) over a ThreadlineSession, for
test_openai_agents.py. argv: store location, session id, model server url, prompt, marker file.
The tool `lookup` answers at once unless its `q` is 'block': then it writes the marker file and
waits for ever (the test SIGKILLs the process there). Prints the run's final output as JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from agents import Agent, ModelSettings, Runner, function_tool, set_default_openai_api
from agents import set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI

from threadline import Store
from threadline.openai_agents import ThreadlineSession


def make_agent(marker: str) -> Agent:
    @function_tool
    async def lookup(q: str) -> str:
        """Looks a thing up."""
        if q == "block":
            Path(marker).write_text("running")
            await asyncio.Event().wait()
        return f"found {q}"

    # store=False + encrypted reasoning: the reasoning items must come back exactly as issued
    return Agent(
        name="helper",
        instructions="Be brief.",
        tools=[lookup],
        model="gpt-5",
        model_settings=ModelSettings(store=False, response_include=["reasoning.encrypted_content"]),
    )


def use_server(url: str) -> None:
    set_tracing_disabled(True)
    set_default_openai_api("responses")
    set_default_openai_client(AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0))


async def main() -> None:
    location, session_id, url, prompt, marker = sys.argv[1:6]
    use_server(url)
    with Store.open(location) as store:
        session = ThreadlineSession(session_id, store)
        result = await Runner.run(make_agent(marker), prompt, session=session)
        sys.stdout.write(json.dumps(result.final_output))


if __name__ == "__main__":
    asyncio.run(main())
