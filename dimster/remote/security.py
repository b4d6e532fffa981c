"""The shared token and what ZeroMQ makes of it. Both ends derive CURVE key pairs from the token (one
for agents, one for coordinators): the channel is encrypted, and an agent accepts only a peer that
holds the coordinators' secret key, that is, the token. No unauthenticated channel is ever served."""

import hashlib
import os
from pathlib import Path

import zmq
import zmq.auth.thread
from zmq.utils import z85

from dimster.errors import DimsterError

TOKEN_ENV = "DIMSTER_WORKER_TOKEN"
MIN_TOKEN_LENGTH = 16


def curve_keys(token: str, role: str) -> tuple[bytes, bytes]:
    """(public, secret) key of `role` (agent | coordinator), z85-encoded."""
    secret = z85.encode(hashlib.sha256(f"dimster {role} {token}".encode()).digest())
    return zmq.curve_public(secret), secret


def read_token(token_file: str | Path | None, env_name: str = TOKEN_ENV, what: str = "--token-file") -> str:
    """The token from a file, or else from an environment variable; never from the command line."""
    if token_file:
        path = Path(token_file).expanduser()
        try:
            token = path.read_text().strip()
        except OSError as e:
            raise DimsterError(f"{what} {path}: cannot read it ({e.strerror})") from None
        source = f"{what} {path}"
    else:
        token = os.environ.get(env_name, "").strip()
        source = f"${env_name}"
        if not token:
            raise DimsterError(f"no worker token: give {what} FILE or set ${env_name}")
    if len(token) < MIN_TOKEN_LENGTH:
        raise DimsterError(f"{source}: the worker token must be at least {MIN_TOKEN_LENGTH} characters")
    return token


def serve_securely(context: zmq.Context, socket: zmq.Socket, token: str) -> zmq.auth.thread.ThreadAuthenticator:
    """Make `socket` a CURVE server that lets in only holders of the token."""
    allowed, _ = curve_keys(token, "coordinator")

    class Coordinators:
        def callback(self, _domain: str, key: bytes) -> bool:
            return key in (allowed, z85.decode(allowed))

    authenticator = zmq.auth.thread.ThreadAuthenticator(context)
    authenticator.start()
    authenticator.configure_curve_callback("*", credentials_provider=Coordinators())
    public, secret = curve_keys(token, "agent")
    socket.curve_server = True
    socket.curve_publickey, socket.curve_secretkey = public, secret
    return authenticator


def connect_securely(socket: zmq.Socket, token: str) -> None:
    """Make `socket` a CURVE client of an agent that holds the same token."""
    socket.curve_serverkey, _ = curve_keys(token, "agent")
    socket.curve_publickey, socket.curve_secretkey = curve_keys(token, "coordinator")
