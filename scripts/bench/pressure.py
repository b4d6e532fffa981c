"""Pressure beside a run or a test suite, bounded and ending by itself: a CPU hog that keeps every core
busy at normal priority, or memory pressure that holds and keeps touching a share of the machine's
memory. It is what a busy load-generator host looks like to dimster.

    .venv/bin/python scripts/bench/pressure.py --seconds 3600 cpu            # one busy process per core
    .venv/bin/python scripts/bench/pressure.py --share 0.6 --seconds 600 memory
    .venv/bin/python scripts/bench/pressure.py --seconds 3600 cpu -- scripts/test.sh   # ends with the command

With a command after `--`, the pressure lasts as long as the command (at most --seconds) and the exit
code is the command's. The hog's processes are this script's children, ended by PID at the end and on
SIGTERM or Ctrl-C; each also ends by itself after --seconds, should this script be killed."""

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import time

PAGE = 4096


def _spin(seconds: float) -> None:
    """A busy loop for `seconds` (normal priority: it competes as any user process does)."""
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for _ in range(10_000):
            x += 1


def _hold(megabytes: int, seconds: float) -> None:
    """Holds `megabytes` and writes one byte of every page each second, so that the kernel keeps them
    resident (or must swap or reclaim page cache to do so) for `seconds`."""
    block = bytearray(megabytes * 1024 * 1024)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for i in range(0, len(block), PAGE):
            block[i] = (block[i] + 1) & 0xFF
        time.sleep(1)


def _memory_total_mb() -> int:
    with open("/proc/meminfo") as info:
        for line in info:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise SystemExit("pressure: /proc/meminfo has no MemTotal")


def start(kind: str, seconds: float, processes: int, share: float) -> list[multiprocessing.Process]:
    if kind == "cpu":
        hogs = [multiprocessing.Process(target=_spin, args=(seconds,), daemon=True) for _ in range(processes)]
    else:
        each = int(_memory_total_mb() * share / processes)
        hogs = [multiprocessing.Process(target=_hold, args=(each, seconds), daemon=True) for _ in range(processes)]
    for hog in hogs:
        hog.start()
    return hogs


def stop(hogs: list[multiprocessing.Process]) -> None:
    for hog in hogs:
        if hog.is_alive() and hog.pid:
            os.kill(hog.pid, signal.SIGTERM)
    for hog in hogs:
        hog.join(5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("cpu", "memory"))
    parser.add_argument("--seconds", type=float, default=600, help="the pressure's longest life (default 600)")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="default: one per core")
    parser.add_argument("--share", type=float, default=0.5, help="memory: the share of MemTotal held (default 0.5)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...: the pressure lasts as long as it")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    hogs = start(args.kind, args.seconds, args.processes, args.share)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    print(f"pressure: {args.kind} by {len(hogs)} process(es) {[h.pid for h in hogs]}, at most {args.seconds:g} s",
          file=sys.stderr, flush=True)  # fmt: skip
    try:
        if command:
            return subprocess.call(command)
        while any(h.is_alive() for h in hogs):
            time.sleep(1)
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        stop(hogs)
        print(f"pressure: ended after {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
