"""Start a command in a session of its own, print its PID and exit.

`spawn` runs this file (by path, standard library only) as a short-lived intermediate: once it has
exited, the command is no child of the dimster process that asked for it but of init. So whichever
dimster process stops a broker later (the run's coordinator started it, `cluster redeploy` from
another terminal stops it) sees it exit, instead of a zombie that its parent never reaps.

Usage: python detach.py LOG_FILE COMMAND [ARG ...]  (the command's output is appended to LOG_FILE)
"""

import subprocess
import sys


def main() -> None:
    log_file, command = sys.argv[1], sys.argv[2:]
    with open(log_file, "ab") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    print(process.pid, flush=True)


if __name__ == "__main__":
    main()
