#!/bin/sh
# dimster's short kafka-storage.sh: Kafka's storage tool (format, random-uuid, info, ...).
exec "$(dirname "$0")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
