"""A warm kernel per server (issue #37, the burst): each student's JupyterLab server starts one python kernel in
the background as it starts, imports there what the course's notebooks import first (torch, matplotlib, the
explorers, the lab), and hands it to the first notebook that asks for a python kernel.

Why: in a class that presses Run All together, the set-up cell (``import torch``, 1.2 CPU-s) and the first
explorer (matplotlib, ipywidgets: 0.6 CPU-s more than the next ones) of thirty kernels at once are the slowest
cells (``bench/cell_cpu.py``: 30 kernels x 1.2 CPU-s on 2 cores cannot all finish before 18 s).  Done while the
server is pre-started (``python -m rlhf_course.classroom prestart``), before the class, they cost the class
nothing; done at a login, they cost what the notebook would have spent anyway (the kernel would import the same).

What the notebook gets is the kernel it would have got, started earlier: the same kernel spec and environment
(the server's; ``JPY_SESSION_NAME`` set to the notebook as jupyter_server sets it, and ipykernel's ``__session__``),
its working folder moved to the notebook's folder before the notebook sees it, an empty namespace (the imports
ran silently, binding no name: ``import torch`` is still the set-up cell's to do; modules only sit in
``sys.modules``), execution count 1.  Until it is handed over it is not in the server's kernel list (the
student does not see a kernel they did not start).  One warm kernel per server, not replaced once taken (a
replacement would start just as the class's cells do); a notebook that asks for another kernel spec, or opens
while the warm one has failed, gets a fresh kernel as usual.  Matplotlib reads a ``matplotlibrc`` in the working
folder at its import: the warm kernel imported it in the server's root folder, so a ``matplotlibrc`` beside the
notebook (none of the course's) is not read.

Enabled per server: ``c.ServerApp.kernel_manager_class = "rlhf_course.classroom.warm_kernels.WarmKernelManager"``
(``make hub HUB_WARM_KERNELS=1`` writes it into the students' Jupyter config).
"""
from __future__ import annotations

import asyncio
import os

from jupyter_server._tz import utcnow
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from tornado.ioloop import IOLoop
from traitlets import Float, List, Unicode

WARM_MODULES = ["torch", "torch.nn.functional", "matplotlib.pyplot", "ipywidgets", "rlhf_course.explorers",
                "rlhf_course.lab.ppo_dpo", "rlhf_course.lab.plots"]


def import_code(modules: list[str]) -> str:
    """Code that imports ``modules`` and binds no name in the kernel's namespace (it runs in a namespace of its
    own; a module that fails to import is skipped: the notebook's own import will say why)."""
    body = ("import importlib\n"
            f"for name in {modules!r}:\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except Exception:\n        pass\n")
    return f"exec({body!r}, {{}})"


def hand_over_code(cwd: str, env: dict[str, str]) -> str:
    """Code that moves the kernel to the notebook's folder and sets the variables a kernel started for it has
    (those that differ from the warm kernel's), binding no name."""
    body = ("import os\n"
            f"os.chdir({cwd!r})\n"
            f"os.environ.update({env!r})\n")
    if "JPY_SESSION_NAME" in env:  # ipykernel sets __session__ from it as it starts
        body += f"get_ipython().user_ns['__session__'] = {env['JPY_SESSION_NAME']!r}\n"
    return f"exec({body!r}, {{'get_ipython': get_ipython}})"


class WarmKernelManager(AsyncMappingKernelManager):
    warm_modules = List(Unicode(), WARM_MODULES, help="modules the warm kernel imports before a notebook takes it"
                        ).tag(config=True)
    warm_kernel_name = Unicode("", help="the kernel spec of the warm kernel (default: the server's default)"
                               ).tag(config=True)
    warm_timeout = Float(300, help="seconds the warm kernel may take to start and import").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._warm: asyncio.Task | None = None
        self._warm_id: str | None = None
        self._warm_env: dict[str, str] = {}
        IOLoop.current().add_callback(self._begin_warm)  # once the server's loop runs

    def _begin_warm(self) -> None:
        self._warm = asyncio.ensure_future(self._start_warm())

    async def _start_warm(self) -> str | None:
        """Start the warm kernel and run its imports; its id, or None if that failed (logged)."""
        try:
            self._warm_env = dict(os.environ)
            kernel_id = await super().start_kernel(kernel_name=self.warm_kernel_name or None, env=self._warm_env)
            self._warm_id = kernel_id
            reply = await asyncio.wait_for(self._run(kernel_id, import_code(list(self.warm_modules))),
                                           self.warm_timeout)
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"{reply['content'].get('ename')}: {reply['content'].get('evalue')}")
            self.log.info("Warm kernel %s ready (imported %s)", kernel_id, ", ".join(self.warm_modules))
            return kernel_id
        except Exception:
            self.log.exception("The warm kernel failed: notebooks get fresh kernels")
            if self._warm_id and self._warm_id in self:
                await self.shutdown_kernel(self._warm_id, now=True)
            self._warm_id = None
            return None

    async def _run(self, kernel_id: str, code: str) -> dict:
        client = self.get_kernel(kernel_id).client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=self.warm_timeout)
            return await client.execute_interactive(code, silent=True, store_history=False,
                                                    timeout=self.warm_timeout, output_hook=lambda msg: None)
        finally:
            client.stop_channels()

    async def _take_warm(self, kernel_name: str | None, path, env: dict | None) -> str | None:
        """The warm kernel, moved to ``path``'s folder with ``env``'s differences, if it suits; else None."""
        default = self.warm_kernel_name or self.default_kernel_name
        if self._warm is None or (kernel_name or default) != default:
            return None
        warm, self._warm = self._warm, None  # one notebook gets it; the others start their own
        kernel_id = await warm
        self._warm_id = None
        if kernel_id is None or kernel_id not in self:
            return None
        cwd = self.cwd_for_path(path) if path is not None else self.root_dir
        changes = {k: v for k, v in (env or {}).items() if self._warm_env.get(k) != v}
        try:
            reply = await self._run(kernel_id, hand_over_code(cwd, changes))
            if reply["content"]["status"] != "ok":
                raise RuntimeError(reply["content"].get("evalue"))
        except Exception:
            self.log.exception("Could not hand over the warm kernel %s: a fresh kernel instead", kernel_id)
            await self.shutdown_kernel(kernel_id, now=True)
            return None
        self.get_kernel(kernel_id).last_activity = utcnow()  # the student's now, not the server's start
        self.log.info("Warm kernel %s handed to %s (in %s)", kernel_id, path, cwd)
        return kernel_id

    async def start_kernel(self, *, kernel_id: str | None = None, path=None, **kwargs) -> str:  # type: ignore[override]
        if kernel_id is None:  # a client that names the id wants a kernel of that id
            taken = await self._take_warm(kwargs.get("kernel_name"), path, kwargs.get("env"))
            if taken is not None:
                return taken
        return await super().start_kernel(kernel_id=kernel_id, path=path, **kwargs)

    def list_kernels(self):
        return [model for model in super().list_kernels() if model["id"] != self._warm_id]
