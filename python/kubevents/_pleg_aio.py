"""asyncio glue for ``kubevents.pleg``: the native side resolves futures from its own threads through these."""

from __future__ import annotations

import asyncio
from typing import Any


def resolve(fut: asyncio.Future[Any], value: Any) -> None:
    """Sets the result unless the awaiting task gave up (cancelled) meanwhile."""
    if not fut.done():
        fut.set_result(value)


async def next_event(channel: Any) -> Any:
    """The next event of a PLEG event channel, waiting without blocking a thread."""
    loop = asyncio.get_running_loop()
    while True:
        ev = channel.try_recv()
        if ev is not None:
            return ev
        if channel.closed:
            raise StopAsyncIteration
        ready: asyncio.Future[None] = loop.create_future()

        def wake(fut: asyncio.Future[None] = ready) -> None:
            try:
                loop.call_soon_threadsafe(resolve, fut, None)
            except RuntimeError:
                # The loop closed while we waited; nobody is left to wake.
                pass

        channel._on_ready(wake)
        await ready
