"""Give the processes a process started back N levels of nice: `priority.py PID N`.

scripts/test.sh runs the tiers that use no Kafka at nice 9 beside the kafka tier, the suite's critical
path, and gives those levels back once that tier ends: every thread of the processes they started
gets its nice lowered by N (to 0 at least), so that a thread or process dimster itself put at a lower
priority (nice 10 more: a warm-up summary, the import of a run's end) stays that much lower. At nice
9 that is 19, Linux's last level, so no such offset was cut off. The processes are PID's descendants
and, for those started detached (a warm Spark server, a cluster's nodes, whose parent is gone), every
process whose environment carries MARK=PID. Lowering a nice value takes root: as another user this
says so on stderr and exits 1, and the caller goes on."""

import os
import sys
from collections import defaultdict

MARK = "DIMSTER_SUITE_BESIDE"  # scripts/test.sh exports it in the tiers beside the kafka tier


def processes() -> dict[int, int]:
    """Each process's parent."""
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                parents[int(name)] = int(stat.read().rsplit(")", 1)[1].split()[1])  # the name may hold ')'
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
    return parents


def marked(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return mark in environ.read().split(b"\0")
    except OSError:  # ended meanwhile, or not ours to read
        return False


def started_by(root: int) -> list[int]:
    """`root`, the processes that carry its mark, and their descendants, each parent before its children."""
    parents = processes()
    children: dict[int, list[int]] = defaultdict(list)
    for pid, parent in parents.items():
        children[parent].append(pid)
    mark = f"{MARK}={root}".encode()
    found = [root, *(pid for pid in sorted(parents) if pid != root and marked(pid, mark))]
    seen = set(found)
    for pid in found:  # grows as it goes: breadth first
        kids = [kid for kid in children.get(pid, []) if kid not in seen]
        seen.update(kids)
        found.extend(kids)
    return found


def threads(pid: int) -> list[int]:
    try:
        return sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task"))
    except OSError:  # ended meanwhile
        return []


def main() -> int:
    root, levels = int(sys.argv[1]), int(sys.argv[2])
    refused = 0
    for pid in started_by(root):
        for tid in threads(pid):  # Linux keeps a nice value per thread
            try:
                os.setpriority(os.PRIO_PROCESS, tid, max(0, os.getpriority(os.PRIO_PROCESS, tid) - levels))
            except ProcessLookupError:
                continue
            except PermissionError:
                refused += 1
    if refused:
        print(f"priority.py: {refused} thread(s) kept their nice value (lowering it takes root)", file=sys.stderr)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
