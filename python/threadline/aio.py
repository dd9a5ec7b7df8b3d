"""The same API for asyncio: every call that touches the store runs on a worker thread
(``asyncio.to_thread``; the binding releases the GIL around core calls), so the event loop
never waits on the disk or the database.

    async with Store.open("agent.db") as store:
        session = await store.create_session(project="my-app")
        await session.append({"role": "user", "content": "hi"})
        messages = await session.messages
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Dict, Generator, List, Mapping, Optional, Sequence

from . import RecallTools, ThreadlineError
from . import Session as SyncSession
from . import Store as SyncStore
from . import Message

__all__ = ["Store", "Session", "RecallTools", "ThreadlineError"]


class Session:
    """An asyncio view of a ``threadline.Session``; properties are awaitables
    (``await session.messages``)."""

    def __init__(self, sync: SyncSession) -> None:
        self.sync = sync

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def info(self) -> Awaitable[Dict[str, Any]]:
        return asyncio.to_thread(lambda: self.sync.info)

    async def append(self, message: Message) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.append, message)

    async def append_many(self, messages: Sequence[Message]) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.append_many, messages)

    @property
    def messages(self) -> Awaitable[List[Dict[str, Any]]]:
        return asyncio.to_thread(lambda: self.sync.messages)

    @property
    def all_messages(self) -> Awaitable[List[Dict[str, Any]]]:
        return asyncio.to_thread(lambda: self.sync.all_messages)

    async def envelopes(self, from_seq: int = 0, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(self.sync.envelopes, from_seq, limit)

    @property
    def turns(self) -> Awaitable[List[Dict[str, Any]]]:
        return asyncio.to_thread(lambda: self.sync.turns)

    @property
    def token_tracker(self) -> Awaitable[Dict[str, Any]]:
        return asyncio.to_thread(lambda: self.sync.token_tracker)

    @property
    def context_fill(self) -> Awaitable[Dict[str, Any]]:
        return asyncio.to_thread(lambda: self.sync.context_fill)

    async def build_context(
        self, target: str = "anthropic", max_tokens: Optional[int] = None, **options: Any
    ) -> Dict[str, Any]:
        return await asyncio.to_thread(
            lambda: self.sync.build_context(target=target, max_tokens=max_tokens, **options)
        )

    async def snapshot(self) -> str:
        return await asyncio.to_thread(self.sync.snapshot)

    async def recover(
        self, unknown_outcome: Optional[str] = None, replayed: Optional[Sequence[str]] = None
    ) -> Dict[str, Any]:
        return await asyncio.to_thread(self.sync.recover, unknown_outcome, replayed)

    async def set_status(self, status: str) -> None:
        await asyncio.to_thread(self.sync.set_status, status)

    async def export(self, format: str, *, events: Optional[bool] = None) -> str:
        return await asyncio.to_thread(lambda: self.sync.export(format, events=events))

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _Opening:
    """What ``Store.open`` returns: await it, or use it in ``async with``."""

    def __init__(self, path: Optional[str], options: Mapping[str, Any]) -> None:
        self._path = path
        self._options = options
        self._store: Optional[Store] = None

    async def _open(self) -> "Store":
        sync = await asyncio.to_thread(SyncStore.open, self._path, **self._options)
        return Store(sync)

    def __await__(self) -> Generator[Any, None, "Store"]:
        return self._open().__await__()

    async def __aenter__(self) -> "Store":
        self._store = await self._open()
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        if self._store is not None:
            await self._store.close()


class Store:
    """An asyncio view of a ``threadline.Store``."""

    def __init__(self, sync: SyncStore) -> None:
        self.sync = sync

    @staticmethod
    def open(path_or_url: Optional[str] = None, **options: Any) -> _Opening:
        return _Opening(path_or_url, options)

    @property
    def path(self) -> str:
        return self.sync.path

    async def create_session(self, **options: Any) -> Session:
        return Session(await asyncio.to_thread(lambda: self.sync.create_session(**options)))

    async def open_session(self, id: str, *, prompt_key: Optional[str] = None) -> Session:
        return Session(await asyncio.to_thread(self.sync.open_session, id, prompt_key=prompt_key))

    async def list_sessions(self, **filter: Any) -> List[Dict[str, Any]]:
        return await asyncio.to_thread(lambda: self.sync.list_sessions(**filter))

    async def delete_session(self, id: str) -> None:
        await asyncio.to_thread(self.sync.delete_session, id)

    async def search(self, query: str, **options: Any) -> Dict[str, Any]:
        return await asyncio.to_thread(lambda: self.sync.search(query, **options))

    async def recall_tools(self, **options: Any) -> RecallTools:
        return await asyncio.to_thread(lambda: self.sync.recall_tools(**options))

    async def import_snapshot(self, snapshot: str) -> Session:
        return Session(await asyncio.to_thread(self.sync.import_snapshot, snapshot))

    async def import_(self, source: Mapping[str, Any], **options: Any) -> Dict[str, Any]:
        """``Store.import_`` on a worker thread; ``on_progress`` is called from that thread."""
        return await asyncio.to_thread(lambda: self.sync.import_(source, **options))

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
