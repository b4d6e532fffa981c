#!/bin/sh
# dimster's short kafka-server-start.sh: runs a Kafka node in the foreground, logging to the console.
if [ $# -lt 1 ]; then
  echo "USAGE: $0 [-daemon] server.properties [--override property=value]*" >&2
  exit 1
fi
[ "$1" = "-daemon" ] && shift
base_dir=$(cd "$(dirname "$0")/.." && pwd)
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/log4j2.properties}"
: "${KAFKA_HEAP_OPTS:=-Xmx1G -Xms1G}"
export KAFKA_LOG4J_OPTS KAFKA_HEAP_OPTS
exec "$base_dir/bin/kafka-run-class.sh" kafka.Kafka "$@"
