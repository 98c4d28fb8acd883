"""Walks whose lookups run concurrently on one event loop (transport.py's
`aget`), their answers coming back one at a time to the walk, which alone
touches its own state: no locks, no thread per request.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor


def drive(walk, transports) -> object:
    """Run the coroutine `walk` on a new event loop and return its result;
    the transports' connections are closed before the loop is. Called where
    a loop already runs (the library used from a notebook), the new loop
    runs on a thread of its own, as one thread runs one loop."""
    async def main():
        try:
            return await walk
        finally:
            for t in transports:
                t.aclose()
            await asyncio.sleep(0)  # the closed connections' last callbacks
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with ThreadPoolExecutor(1, thread_name_prefix="walk") as thread:
        return thread.submit(asyncio.run, main()).result()


class InFlight:
    """Lookups started by key; `next`, or iterating, gives the answers as
    they come. Used as `async with`, it is closed on the way out."""

    def __init__(self):
        self._answers: asyncio.Queue = asyncio.Queue()
        self._tasks: set[asyncio.Task] = set()

    def start(self, key, lookup) -> None:
        task = asyncio.ensure_future(lookup)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._answers.put_nowait((key, t)))

    def __len__(self) -> int:
        """Lookups started whose answers were not taken yet."""
        return len(self._tasks)

    async def next(self):
        """(key, answer) of a finished lookup; its exception if it failed."""
        key, task = await self._answers.get()
        self._tasks.discard(task)
        return key, task.result()

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self._tasks:
            raise StopAsyncIteration
        return await self.next()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        """Cancel what is still running (the walk has failed or is done) and
        collect every outcome, so that none is reported as never retrieved."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
