"""nbclient's NotebookClient, waiting for kernel messages in short slices.

With pyzmq 27 / jupyter_client 8.10 / nbclient 0.11, a cell that displays ipywidgets sometimes
leaves its execute reply unnoticed: the reply is on the shell socket, but the asyncio poll is not
woken, and nbclient only finds it when the whole cell timeout has passed (jupyter/nbclient#312,
open).  Here that cost 300 s in one run of the source notebook out of two.  Polling in slices of
a second finds such a message within a second; a message that really does not come still ends in
nbclient's own timeout handling, at the same deadline.
"""
from __future__ import annotations

import time
from queue import Empty

from nbclient import NotebookClient

SLICE_SECONDS = 1.0


def _sliced(get_msg):
    async def get_msg_in_slices(timeout: float | None = None, **kwargs):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = SLICE_SECONDS if deadline is None else max(0.0, min(SLICE_SECONDS, deadline - time.monotonic()))
            try:
                return await get_msg(timeout=left, **kwargs)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
    return get_msg_in_slices


class SlicedPollClient(NotebookClient):
    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel):
            channel.get_msg = _sliced(channel.get_msg)
        return kc
