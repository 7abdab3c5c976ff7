"""What one request may make the classroom's JupyterHub hold (`make hub`): memory, and rows of its database.

Any local account reaches the hub (through the proxy, or its loopback port), before any login:

* tornado, under JupyterHub, holds a request's whole body in the hub's memory before any handler sees it, up to
  100 MB (its default; JupyterHub sets none), and the hub runs as root in no cgroup: a few connections posting such
  bodies at once took gigabytes of the machine's memory.  Every body the hub needs is small (the login form, a
  server's activity report, a spawn's options: under 1 kB), so the classroom runs the hub as
  ``python -m rlhf_course.classroom.hub_requests`` (JupyterHub's own ``main``, after :func:`limit_request_bodies`
  lowered tornado's bound to ``MAX_BODY_BYTES``): a longer body is refused (400) as its headers arrive, unread;
* JupyterHub's default role gives every user the ``tokens`` scope, and the note of a token a user asks for is
  stored whatever its length: a request's whole body in a row of root's database, that many rows as requests.  No
  page of the course needs a student's token (the hub gives each server its own), so a user's role here is
  JupyterHub's ``self`` without ``tokens``: her tokens are listed (``read:tokens``), none is made or revoked.
"""
from __future__ import annotations

import functools

MAX_BODY_BYTES = 64 * 1024  # the hub's largest body: a spawn's options or a token's request, far under it
USER_SCOPES = [  # JupyterHub's "self" (jupyterhub/scopes.py, _expand_self_scope) without "tokens": read:tokens only
    "read:users!user", "users:shares!user", "read:shares!user", "users:activity!user", "servers!user",
    "access:servers!user", "read:tokens!user"]


def limit_request_bodies(max_bytes: int = MAX_BODY_BYTES) -> None:
    """Every tornado HTTPServer made from now on in this process, unless it is given its own bound, refuses a request
    body past ``max_bytes`` as its headers arrive (JupyterHub makes its server with no such setting of its own)."""
    from tornado.httpserver import HTTPServer
    original = getattr(HTTPServer.initialize, "__wrapped__", HTTPServer.initialize)

    @functools.wraps(original)
    def initialize(self, *args, max_body_size: int | None = None, **kwargs):
        return original(self, *args, max_body_size=max_bytes if max_body_size is None else max_body_size, **kwargs)

    HTTPServer.initialize = initialize


def hub_config() -> str:
    """The lines of jupyterhub_config.py that take ``tokens`` from the users' role (appended to ``load_roles``)."""
    return f"""
# A user makes no token: its note was stored in the hub's database whatever its size (rlhf_course/classroom/
# hub_requests.py); JupyterHub's "self" otherwise
c.JupyterHub.load_roles.append({{"name": "user", "scopes": {USER_SCOPES!r}}})
"""


def main() -> None:
    """JupyterHub, as ``python -m jupyterhub`` runs it, reading no request body past ``MAX_BODY_BYTES``."""
    limit_request_bodies()
    from jupyterhub.app import main as jupyterhub_main
    jupyterhub_main()


if __name__ == "__main__":
    main()
