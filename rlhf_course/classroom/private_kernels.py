"""Kernels over Unix sockets for clients that start their own kernel (nbclient: nbgrader's Validate,
nbconvert --execute), for `make hub` (rlhf_course/classroom/hub.py puts it in every user's Jupyter config).

With `KernelManager.transport = "ipc"`, a kernel manager that has no connection file yet (nbclient's)
names its sockets `kernel-ipc-N` relative to the current folder, and the kernel, started in the
notebook's folder, binds them relative to its own: the client never reaches it.  This one puts them,
by absolute path and a name of their own, in the user's runtime folder (0700), as a Jupyter server
does for its kernels.  nbgrader's Execute insists on its own manager class: its kernels get a prefix
from `ipc_prefix()` in the nbgrader_config.py the classroom writes beside (one per nbgrader process,
whose kernels run one at a time)."""
import os
import uuid

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_runtime_dir
from traitlets import default


def ipc_prefix() -> str:
    """A fresh absolute prefix for one kernel's sockets, in the user's runtime folder."""
    folder = jupyter_runtime_dir()
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"kernel-{uuid.uuid4()}-ipc")


class PrivateKernelManager(AsyncKernelManager):
    @default("ip")
    def _ip_default(self) -> str:
        if self.transport == "ipc" and not self.connection_file:
            return ipc_prefix()
        return super()._ip_default()
