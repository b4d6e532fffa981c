"""`python -m dimster.clients.java_check KAFKA_VERSION CLIENTS_VERSION`: the Java clients of another
version than the one a process's JVM holds judge a run's properties (see java.py's check). It reads
{roles, common, sections} as JSON on stdin and prints what `check_roles` finds as a JSON pair; a
failure (to fetch or start the clients, or of the check itself) is printed as one line, exit status 1."""

import json
import sys

from dimster.clients import jvm
from dimster.clients.java import check_roles
from dimster.errors import DimsterError


def main(kafka_version: str, clients_version: str) -> int:
    request = json.load(sys.stdin)
    try:
        jvm.start_jvm(kafka_version, clients_version=clients_version)
        print(json.dumps(check_roles(request["roles"], request["common"], request["sections"])))
    except DimsterError as e:
        print(e)
        return 1
    except Exception as e:  # the Java clients of this version could not judge: one line, not a traceback  # noqa: BLE001
        print(f"kafka-clients {clients_version} could not check the properties: {type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
