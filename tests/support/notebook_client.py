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
from collections.abc import Collection
from pathlib import Path
from queue import Empty

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

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


def execute_in_one_kernel(paths: list[Path], timeout: int = 300,
                          until_todo: bool | Collection[Path] = False) -> list:
    """Notebooks top to bottom in one kernel: the first on a fresh kernel, each next one after the kernel's namespace
    is emptied (%reset -f) and its own folder made the working one; the executed notebooks.  One kernel start and one
    import of torch (the explorers', the lab's) instead of one each.  What a fresh kernel could tell apart and an
    emptied one cannot: state kept in imported modules (the package's language, which a Chinese edition's set-up
    cell sets and an English one's does not reset; matplotlib's settings), so a Chinese edition runs after the
    English notebooks, not before one.  Used for the three sources, the companion notebook and then their Chinese
    editions (each edition's code is its source's but for the set-up cell's language line and translated strings:
    make release generates it; tests/grading/test_editions.py), then the releases (each one's code before its TODO is
    its source's).  ``until_todo``: True, or the paths of those that do, stop at their first unimplemented function
    (NotImplementedError; any other error raises); any other notebook's error raises CellExecutionError."""
    clients, executed = [], []
    try:
        for path in paths:
            stops_at_todo = until_todo if isinstance(until_todo, bool) else path in until_todo
            nb = nbformat.read(str(path), as_version=4)
            if clients:  # the names of the notebook before gone; relative paths (the notebooks beside it) from here
                nb.cells.insert(0, nbformat.v4.new_code_cell(f"import os\nos.chdir({str(path.parent)!r})\n%reset -f"))
            client = SlicedPollClient(nb, timeout=timeout, kernel_name="python3",
                                      km=clients[0].km if clients else None,
                                      resources={"metadata": {"path": str(path.parent)}})
            clients.append(client)
            try:
                client.execute(cleanup_kc=False)  # the kernel kept for the next notebook
            except CellExecutionError as error:
                if not stops_at_todo or error.ename != "NotImplementedError":
                    raise
            else:
                assert not stops_at_todo, f"{path} ran to its end: no TODO stopped it"
            if len(clients) > 1:
                reset = nb.cells.pop(0)
                assert not [o for o in reset.outputs if o.output_type == "error"], reset.outputs
            executed.append(nb)
        return executed
    finally:
        for client in clients[1:]:
            if client.kc is not None:
                client.kc.stop_channels()
        if clients:
            clients[0]._cleanup_kernel()
