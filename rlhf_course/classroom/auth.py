"""The local classroom's login (`make hub`): each account has its own password, generated for the run
and printed once by `python -m rlhf_course.classroom`.  Only the hub (root) reads the table.  A real
deployment uses PAM or OAuth instead (README, *Run the course on a JupyterHub*)."""
import hmac

from jupyterhub.auth import Authenticator
from traitlets import Dict


class PasswordTableAuthenticator(Authenticator):
    passwords = Dict(help="user name -> password, generated for this run").tag(config=True)

    async def authenticate(self, handler, data):
        name, password = data.get("username", ""), data.get("password", "")
        expected = self.passwords.get(name)
        if expected and hmac.compare_digest(expected.encode(), password.encode()):
            return name
        return None
