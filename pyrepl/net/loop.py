"""Event loop factory: uvloop when it is installed, asyncio's default loop otherwise.

No global policy is installed; callers get a loop object and run it themselves.
"""

from __future__ import annotations

import asyncio


def new_event_loop(use_uvloop: bool = True) -> asyncio.AbstractEventLoop:
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()
