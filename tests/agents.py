"""`dimster worker serve` agents for tests: real subprocesses, on loopback or inside a network
namespace the test made, optionally with a skewed clock (Debian's libfaketime). Each is ended by its
PID when the test is done."""

import contextlib
import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import zmq

from dimster import __version__
from dimster.coordinator.workers.agent_handshake import WorkersError, handshake
from dimster.coordinator.workers.remote import AgentLink, RemoteWorkers
from dimster.worker.protocol import (
    PROTOCOL_VERSION,
    Assignment,
    Close,
    Closed,
    Hello,
    Message,
    Welcome,
    decode,
    encode,
)
from tests.waiting import until

DIMSTER = str(Path(sys.executable).parent / "dimster")
TOKEN = "a-test-token-of-this-suite-0123456789"


def write_token(folder: Path, token: str = TOKEN) -> Path:
    path = folder / "worker.token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def libfaketime() -> str:
    found = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    assert found, "libfaketime is missing: scripts/setup.sh installs Debian's faketime"
    return found[0]


def status_hello() -> Hello:
    return Hello("test", PROTOCOL_VERSION, "", "test", status_only=True)


def wait_until_up(address: str, token: str, process: subprocess.Popen, timeout: float = 60) -> None:
    context = zmq.Context()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            assert process.poll() is None, f"agent on {address} exited with {process.returncode}"
            with contextlib.suppress(WorkersError):
                socket, _ = handshake(context, address, token, status_hello(), timeout=2)
                socket.close()
                return
        raise AssertionError(f"agent on {address} did not come up within {timeout:.0f}s")
    finally:
        context.term()


@contextlib.contextmanager
def running_agent(
    address: str,
    token_file: Path,
    log: Path,
    netns: str | None = None,
    skew: float | None = None,
    work_dir: Path | None = None,
    options: tuple[str, ...] = (),
):
    """An agent listening on `address` (with more `dimster worker serve` options); yields its Popen
    (its pid is the agent's own)."""
    command = [DIMSTER, "worker", "serve", "--listen", address, "--token-file", str(token_file), *options]
    command += ["--work-dir", str(work_dir)] if work_dir else []
    if netns:
        command = ["ip", "netns", "exec", netns, *command]  # execs the agent: same pid
    env = dict(os.environ)
    if skew is not None:
        env.update(LD_PRELOAD=libfaketime(), FAKETIME=f"{skew:+}", FAKETIME_DONT_RESET="1")
    with log.open("ab") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_up(address, token_file.read_text().strip(), process)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(40)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def idle(address: str) -> bool:
    """Whether the agent at `address` answers a status Hello and serves no run."""
    context = zmq.Context()
    try:
        socket, welcome = handshake(context, address, TOKEN, status_hello(), 60)  # a busy host's agent may be slow
        socket.close()
        return not welcome.busy_with
    finally:
        context.term()


def claim(context: zmq.Context, address: str, workload: str = "r1") -> zmq.Socket:
    """A socket that holds the agent's run of `workload` (as a coordinator's does after Hello)."""
    socket, _ = handshake(context, address, TOKEN, Hello(__version__, PROTOCOL_VERSION, workload, "test-host"), 60)
    return socket


def answer(socket: zmq.Socket, timeout: float = 30) -> Message | None:
    """The agent's next message (a worker's without the frame naming the worker), or None when none
    comes within `timeout` seconds."""
    return decode(socket.recv_multipart()[-1]) if socket.poll(int(timeout * 1000)) else None


def release(context: zmq.Context, address: str, socket: zmq.Socket, closes: bool = False) -> list[Message]:
    """Close the run `socket` holds and wait until the agent is free; returns what it answered (its log
    files and Closed, when a worker ran). `closes`: a worker ran, so each answer is waited for until
    Closed (a niced agent may take seconds to ship a log), not 2 s."""
    socket.send(encode(Close()))
    answers = []
    while (message := answer(socket, 60 if closes else 2)) is not None:
        answers.append(message)
        if isinstance(message, Closed):
            break
    socket.close(linger=500)
    # a hang guard: a niced agent may wait seconds for a CPU
    assert until(lambda: idle(address), every=0.2), f"agent on {address} is still busy"
    return answers


def assignment(version: str = "4.3.1", index: int = 0, workload: dict | None = None) -> Assignment:
    return Assignment(index, "127.0.0.1:9", {"name": "w"} if workload is None else workload, [], [], 1, 5, "", version)


@contextlib.contextmanager
def inproc_agent_link(log_dir: Path, timeout: float):
    """RemoteWorkers with one link whose far end (the 'agent') the test holds, over inproc PAIR sockets;
    yields (workers, the agent's end)."""
    workers = RemoteWorkers(["agent-a:1"], "token", log_dir=log_dir, timeout=timeout)
    near, far = workers.context.socket(zmq.PAIR), workers.context.socket(zmq.PAIR)
    near.bind("inproc://agent")
    far.connect("inproc://agent")
    welcome = Welcome(__version__, PROTOCOL_VERSION, "host-a", 2, 1 << 30)
    link = AgentLink(0, "agent-a:1", near, welcome, last_heard=time.monotonic(), workers=[0])
    workers.links.append(link)
    workers.owner = [link]
    try:
        yield workers, far
    finally:
        far.close(linger=0)
        workers.close()
