#!/bin/sh
# dimster's short kafka-run-class.sh: runs a class of Kafka with the jars of libs/, taking the options
# Kafka's own script takes from the environment: KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_OPTS,
# KAFKA_LOG4J_OPTS, KAFKA_JMX_OPTS (with JMX_PORT), LOG_DIR, CLASSPATH and JAVA_HOME.
if [ $# -lt 1 ]; then
  echo "USAGE: $0 [-daemon] [-name servicename] [-loggc] classname [opts]" >&2
  exit 1
fi
# Kafka's scripts pass these; in a container the process stays in the foreground and logs to the console.
while [ $# -gt 0 ]; do
  case "$1" in
    -name) shift 2 ;;
    -daemon | -loggc) shift ;;
    *) break ;;
  esac
done
base_dir=$(cd "$(dirname "$0")/.." && pwd)
CLASSPATH="${CLASSPATH:+$CLASSPATH:}$base_dir/libs/*"
: "${KAFKA_HEAP_OPTS:=-Xmx256M}"
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true}"
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.properties}"
: "${KAFKA_JMX_OPTS:=-Dcom.sun.management.jmxremote -Dcom.sun.management.jmxremote.authenticate=false -Dcom.sun.management.jmxremote.ssl=false}"
if [ -n "$JMX_PORT" ]; then
  KAFKA_JMX_OPTS="$KAFKA_JMX_OPTS -Dcom.sun.management.jmxremote.port=$JMX_PORT -Dcom.sun.management.jmxremote.rmi.port=$JMX_PORT"
fi
JAVA=java
[ -n "$JAVA_HOME" ] && JAVA="$JAVA_HOME/bin/java"
set -f  # the options below are split into words, as Kafka's script does, but never expanded as file names
exec "$JAVA" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_JMX_OPTS "-Dkafka.logs.dir=${LOG_DIR:-$base_dir/logs}" \
  $KAFKA_LOG4J_OPTS -cp "$CLASSPATH" $KAFKA_OPTS "$@"
