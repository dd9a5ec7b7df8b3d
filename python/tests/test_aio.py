"""threadline.aio: the same API for asyncio, its calls run off the event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, List

import pytest

from threadline import ThreadlineError, aio


def test_aio_round_trip_and_errors(location: str) -> None:
    async def main() -> None:
        async with aio.Store.open(location) as store:
            session = await store.create_session(project="aio", model="claude-sonnet-4-5")
            message = {"role": "user", "content": [{"type": "text", "text": "hi"}], "big": 10**30}
            filled = await session.append(message)
            assert filled["seq"] == 0
            await session.append_many([{"role": "assistant", "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn"}])
            assert (await session.messages)[0] == message
            assert len(await session.turns) == 1
            assert (await session.token_tracker)["contextTokens"] > 0
            ctx = await session.build_context(target="anthropic", max_tokens=1000)
            assert [m["role"] for m in ctx["messages"]] == ["user", "assistant"]
            assert [s["id"] for s in await store.list_sessions(project="aio")] == [session.id]
            with pytest.raises(ThreadlineError) as info:
                await store.open_session("missing")
            assert info.value.code == "NOT_FOUND"
            with pytest.raises(ThreadlineError) as info:
                await session.append({"role": "user", "content": float("nan")})
            assert info.value.code == "INVALID_INPUT"
            await session.close()
        # `await Store.open(...)` works too, and the store was closed by `async with`
        store2 = await aio.Store.open(location)
        assert len(await (await store2.open_session(session.id)).messages) == 2
        await store2.close()
        with pytest.raises(ThreadlineError) as info:
            await store.list_sessions()
        assert info.value.code == "CLOSED"

    asyncio.run(main())


def test_aio_calls_run_on_worker_threads_and_the_loop_stays_free(sqlite_path: str) -> None:
    # Each call runs on a thread that is not the event loop's, so other tasks run meanwhile.
    seen: List[Any] = []

    async def main() -> None:
        loop_thread = threading.get_ident()
        async with aio.Store.open(sqlite_path) as store:
            session = await store.create_session()
            real = session.sync.append

            def spy(m: Any) -> Any:
                seen.append(threading.get_ident())
                return real(m)

            session.sync.append = spy  # type: ignore[method-assign]
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            t = asyncio.ensure_future(ticker())
            await asyncio.gather(*(session.append(f"message {i}") for i in range(20)))
            t.cancel()
            assert len(await session.messages) == 20
            assert ticks > 0
        assert seen and all(ident != loop_thread for ident in seen)

    asyncio.run(main())
