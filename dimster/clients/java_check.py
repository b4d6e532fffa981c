"""`python -m dimster.clients.java_check KAFKA_VERSION CLIENTS_VERSION`: the Java clients of another
version than the one a process's JVM holds judge a run's properties (see properties.py). It reads
{roles, common, sections} as JSON on stdin and prints the first problem, or nothing; a failure to
fetch or start the clients is printed as one line with exit status 1."""

import json
import sys

from dimster.clients import jvm
from dimster.clients.properties import java_problems
from dimster.errors import DimsterError


def main(kafka_version: str, clients_version: str) -> int:
    request = json.load(sys.stdin)
    try:
        jvm.start_jvm(kafka_version, clients_version=clients_version)
        print(next(java_problems(request["roles"], request["common"], request["sections"]), ""))
    except DimsterError as e:
        print(e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
