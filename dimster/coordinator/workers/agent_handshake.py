"""Connecting to one `dimster worker serve` agent: the secure socket, Hello, and its answer, or one line
saying why not."""

import zmq
from zmq.utils.monitor import recv_monitor_message

from dimster.clock import Deadline
from dimster.errors import DimsterError
from dimster.remote.agent import endpoint
from dimster.remote.security import connect_securely
from dimster.worker.protocol import Hello, ProtocolError, Refused, Welcome, decode, encode

CONNECT_TIMEOUT = 10.0
MAX_FROM_AGENT = 64 * 2**20  # the largest message an agent may send: a log file of up to 50 MiB and its frame


class WorkersError(DimsterError):
    exit_code = 3


def handshake(
    context: zmq.Context, address: str, token: str, hello: Hello, timeout: float = CONNECT_TIMEOUT
) -> tuple[zmq.Socket, Welcome]:
    """Connect to the agent at `address` and say Hello. Returns (socket, Welcome); raises WorkersError
    with one line saying why not: unreachable, wrong token, refused (busy, other version), silent."""
    socket = context.socket(zmq.DEALER)
    socket.linger = 0
    socket.setsockopt(zmq.MAXMSGSIZE, MAX_FROM_AGENT)  # a larger one drops the agent's connection
    socket.reconnect_ivl = 500
    socket.rcvhwm = 0  # no bound: what a loop behind leaves waiting queues here, never dropped by the agent
    connect_securely(socket, token)
    monitor = socket.get_monitor_socket()
    socket.connect(endpoint(address))
    socket.send(encode(hello))
    seen = set()
    deadline = Deadline(timeout)
    answer = None
    try:
        while not deadline.passed() and answer is None:
            if socket.poll(100):
                answer = decode(socket.recv())
            while monitor.poll(0):
                seen.add(recv_monitor_message(monitor)["event"])
    except ProtocolError as e:
        answer = Refused(f"it answered in another protocol: {e}")
    finally:
        socket.disable_monitor()
        monitor.close(linger=0)
    if isinstance(answer, Welcome):
        return socket, answer
    socket.close(linger=0)
    if isinstance(answer, Refused):
        raise WorkersError(f"agent {address} refused: {answer.reason}")
    handshake_failed = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    handshake_failed |= zmq.EVENT_HANDSHAKE_FAILED_AUTH
    if any(e & handshake_failed for e in seen):
        raise WorkersError(f"agent {address} did not accept our worker token (the secure handshake failed)")
    if zmq.EVENT_CONNECTED not in seen:
        raise WorkersError(f"agent {address} is unreachable: nothing accepted a connection within {timeout:.0f}s")
    raise WorkersError(f"agent {address} did not answer within {timeout:.0f}s (is it a dimster agent?)")
