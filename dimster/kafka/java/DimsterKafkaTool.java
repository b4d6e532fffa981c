// Small bridge into the fetched Kafka jars, compiled once per Kafka version by dimster, and run as one
// long-lived process per Kafka version and state folder: `serve SOCKET IDLE_MS` answers on a Unix domain
// socket, one task per connection, and exits once no connection has been open for IDLE_MS. A connection
// sends one JSON line {"task": ..., "args": [...], "config": {...}} (config: the cluster's security
// properties, which never go on a command line or into a file); the task answers in lines, and the
// connection ends with "#exit N" (after "#stderr ..." lines when the task failed). Lines the client
// sends after the request ask a watch for a reading at once; closing its side ends the watch.
//   configdefs                       -> JSON of every broker config key: type, default, update mode
//   validate FILE                    -> checks a server.properties with Kafka's own KafkaConfig
//   entity-configs J                 -> JSON per kind (group, topic): its config names and the first
//                                       problem Kafka's ConfigDef finds in J's values for it (or null);
//                                       J is JSON {"group": {key: value}, "topic": {key: value}}
//   share-health BOOTSTRAP           -> JSON: finalized share.version and a share group describe
//   alter-broker-configs BOOTSTRAP J -> incremental alter of broker configs; J is JSON
//                                       {"<broker id, or empty for the cluster default>": {key: value|null}}
//   await-assignment BOOTSTRAP MS J  -> one JSON line per group as soon as every member the group should
//                                       have holds its assignment, then {"done": true}; J is JSON
//                                       {"<group>": {"kind": "share"|"consumer", "members": N}}; after MS
//                                       milliseconds {"timeout": true, "pending": {"<group>": "why"}}
//   watch-lag BOOTSTRAP MS J         -> every MS milliseconds, and at once after each line the client
//                                       sends, one JSON line: per group and partition the group's start
//                                       offset and lag (records of its topic it has yet to consume; share
//                                       groups: the share-partition lag); J as above; ends when the client
//                                       closes its side
//   stop-if-idle                     -> the server exits when this is its only connection (#exit 0),
//                                       else goes on (#exit 1)
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.FileReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.server.config.AbstractKafkaConfig;
import org.apache.kafka.server.config.DynamicBrokerConfig;

public class DimsterKafkaTool {
    static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        if (args.length != 3 || !"serve".equals(args[0])) {
            throw new IllegalArgumentException("usage: DimsterKafkaTool serve SOCKET IDLE_MS");
        }
        serve(Path.of(args[1]), Long.parseLong(args[2]));
    }

    /** One task's connection: its lines out, and the client's lines in (each a request for a reading
     *  at once), until the client closes its side. */
    static final class Connection {
        final SocketChannel channel;
        final Semaphore asked = new Semaphore(0);
        volatile boolean closed;
        private final ByteBuffer in = ByteBuffer.allocate(8192).limit(0);

        Connection(SocketChannel channel) {
            this.channel = channel;
        }

        void line(String text) {
            ByteBuffer bytes = ByteBuffer.wrap((text + "\n").getBytes(StandardCharsets.UTF_8));
            synchronized (this) {
                try {
                    while (bytes.hasRemaining()) channel.write(bytes);
                } catch (IOException e) {
                    closed = true;
                    throw new UncheckedIOException(e);
                }
            }
        }

        void json(Object value) throws Exception {
            line(JSON.writeValueAsString(value));
        }

        /** The next line the client sent, or null once it closed its side. */
        String readLine() throws IOException {
            ByteArrayOutputStream line = new ByteArrayOutputStream();
            while (true) {
                if (!in.hasRemaining()) {
                    in.clear();
                    int n = channel.read(in);
                    in.flip();
                    if (n < 0) return line.size() > 0 ? line.toString(StandardCharsets.UTF_8) : null;
                }
                while (in.hasRemaining()) {
                    byte b = in.get();
                    if (b == '\n') return line.toString(StandardCharsets.UTF_8);
                    line.write(b);
                }
            }
        }

        /** After the request: every further line asks for a reading; the end of input closes. */
        void listen() {
            Thread listener = new Thread(() -> {
                try {
                    while (readLine() != null) asked.release();
                } catch (IOException ignored) {
                    // the client is gone: as closed
                }
                closed = true;
                asked.release();
            }, "listen");
            listener.setDaemon(true);
            listener.start();
        }

        /** Waits up to `ms` for a request for a reading (or the client's close), then clears them. */
        void pause(long ms) throws InterruptedException {
            asked.tryAcquire(Math.max(0, ms), TimeUnit.MILLISECONDS);
            asked.drainPermits();
        }
    }

    /** Connections whose client has not closed its side (a task still finishing after that is not one). */
    static int open(Set<Connection> live, Connection except) {
        return (int) live.stream().filter(c -> c != except && !c.closed).count();
    }

    static void serve(Path socket, long idleMs) throws Exception {
        Set<Connection> live = ConcurrentHashMap.newKeySet();
        AtomicLong lastClosed = new AtomicLong(System.currentTimeMillis());
        Files.deleteIfExists(socket);
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket));
        Thread idle = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
                if (open(live, null) == 0 && System.currentTimeMillis() - lastClosed.get() > idleMs) exit(socket);
            }
        }, "idle");
        idle.setDaemon(true);
        idle.start();
        while (true) {
            Connection connection = new Connection(server.accept());
            live.add(connection);
            Thread task = new Thread(() -> {
                try (connection.channel) {
                    answer(connection, socket, live);
                } catch (Exception ignored) {
                    // the client went away mid-answer
                } finally {
                    live.remove(connection);
                    lastClosed.set(System.currentTimeMillis());
                }
            }, "task");
            task.setDaemon(true);
            task.start();
        }
    }

    static void exit(Path socket) {
        try {
            Files.deleteIfExists(socket);
        } catch (IOException ignored) {
            // gone already
        }
        System.exit(0);
    }

    @SuppressWarnings("unchecked")
    static void answer(Connection c, Path socket, Set<Connection> live) throws Exception {
        String request = c.readLine();
        if (request == null) return;
        Map<String, Object> parsed = JSON.readValue(request, Map.class);
        String task = String.valueOf(parsed.get("task"));
        List<String> args = (List<String>) parsed.getOrDefault("args", List.of());
        Map<String, String> config = (Map<String, String>) parsed.getOrDefault("config", Map.of());
        int code;
        boolean broken = false;  // an OutOfMemoryError or the like: answered, then a fresh JVM for the next task
        try {
            code = switch (task) {
                case "configdefs" -> configDefs(c);
                case "validate" -> validate(c, args.get(0));
                case "entity-configs" -> entityConfigs(c, args.get(0));
                case "share-health" -> shareHealth(c, admin(args.get(0), config));
                case "alter-broker-configs" -> alterBrokerConfigs(c, admin(args.get(0), config), args.get(1));
                case "await-assignment" ->
                    awaitAssignment(c, admin(args.get(0), config), Long.parseLong(args.get(1)), args.get(2));
                case "watch-lag" -> watchLag(c, admin(args.get(0), config), Long.parseLong(args.get(1)), args.get(2));
                case "stop-if-idle" -> stopIfIdle(live, c);
                default -> throw new IllegalArgumentException("unknown task " + task);
            };
        } catch (UncheckedIOException e) {
            return;  // the client is gone
        } catch (Exception | Error e) {  // an Error too: a task this helper cannot do is answered, not dropped
            broken = e instanceof VirtualMachineError;
            Throwable cause = e.getCause() == null ? e : e.getCause();
            c.line("#stderr " + e.getClass().getName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' '));
            if (cause != e) c.line("#stderr caused by " + cause.getClass().getName() + ": " + cause.getMessage());
            code = 1;
        }
        c.line("#exit " + Math.max(code, 0));
        if (code < 0 || broken) exit(socket);
    }

    /** -1 (exit) once no other connection is open; a client that closed just before asking (a run's
     *  watch, then `cluster down`) is given two seconds to be seen closed. 1 (go on) otherwise. */
    static int stopIfIdle(Set<Connection> live, Connection c) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 2000;
        while (open(live, c) > 0 && System.currentTimeMillis() < deadline) Thread.sleep(20);
        return open(live, c) == 0 ? -1 : 1;
    }

    static int configDefs(Connection c) throws Exception {
        Map<String, String> modes = DynamicBrokerConfig.dynamicConfigUpdateModes();
        Map<String, Object> out = new LinkedHashMap<>();
        for (ConfigDef.ConfigKey key : AbstractKafkaConfig.CONFIG_DEF.configKeys().values()) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("type", key.type.toString());
            entry.put("default", key.hasDefault() && key.defaultValue != null
                ? ConfigDef.convertToString(key.defaultValue, key.type) : null);
            entry.put("valid", key.validator == null ? null : key.validator.toString());
            entry.put("updateMode", modes.getOrDefault(key.name, "read-only"));
            out.put(key.name, entry);
        }
        c.json(out);
        return 0;
    }

    static int validate(Connection c, String file) throws Exception {
        Properties props = new Properties();
        try (FileReader reader = new FileReader(file)) {
            props.load(reader);
        }
        try {
            kafka.server.KafkaConfig.fromProps(props, false);
            return 0;
        } catch (Exception e) {
            c.line(String.valueOf(e.getMessage()));
            return 1;
        }
    }

    static int entityConfigs(Connection c, String json) throws Exception {
        Map<String, Map<String, Object>> asked = JSON.readValue(json, Map.class);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("group", entityVerdict("org.apache.kafka.coordinator.group.GroupConfig", asked.get("group")));
        out.put("topic", entityVerdict("org.apache.kafka.storage.internals.log.LogConfig", asked.get("topic")));
        c.json(out);
        return 0;
    }

    /** A kind's config names and its ConfigDef's parse of `values` (types, ranges, valid words), read
     *  by reflection: a Kafka version without the class answers names null. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> entityVerdict(String className, Map<String, Object> values) throws Exception {
        Map<String, Object> verdict = new LinkedHashMap<>();
        verdict.put("names", null);
        verdict.put("problem", null);
        Class<?> kind;
        try {
            kind = Class.forName(className);
        } catch (ClassNotFoundException e) {
            return verdict;
        }
        // a Set in some versions, a List in others (LogConfig of 4.3)
        Set<String> names = new java.util.TreeSet<>((Collection<String>) kind.getMethod("configNames").invoke(null));
        verdict.put("names", names);
        if (values == null || !names.containsAll(values.keySet())) return verdict;  // unknown names: told by name
        ConfigDef def;
        try {
            def = (ConfigDef) kind.getField("CONFIG_DEF").get(null);
        } catch (NoSuchFieldException e) {
            def = (ConfigDef) kind.getMethod("configDefCopy").invoke(null);
        }
        try {
            def.parse(values);
        } catch (org.apache.kafka.common.config.ConfigException e) {
            verdict.put("problem", e.getMessage());
        }
        return verdict;
    }

    static Admin admin(String bootstrap, Map<String, String> config) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        props.putAll(config);
        return Admin.create(props);
    }

    @SuppressWarnings("unchecked")
    static int alterBrokerConfigs(Connection c, Admin client, String json) throws Exception {
        Map<String, Map<String, String>> wanted = JSON.readValue(json, Map.class);
        Map<ConfigResource, Collection<AlterConfigOp>> ops = new LinkedHashMap<>();
        wanted.forEach((broker, configs) -> {
            List<AlterConfigOp> list = new ArrayList<>();
            configs.forEach((key, value) -> list.add(value == null
                ? new AlterConfigOp(new ConfigEntry(key, null), AlterConfigOp.OpType.DELETE)
                : new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.SET)));
            ops.put(new ConfigResource(ConfigResource.Type.BROKER, broker), list);
        });
        try (Admin admin = client) {
            admin.incrementalAlterConfigs(ops).all().get();
            return 0;
        } catch (Exception e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            c.line(String.valueOf(cause.getMessage()));
            return 1;
        }
    }

    static int shareHealth(Connection c, Admin client) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = client) {
            FinalizedVersionRange share = admin.describeFeatures().featureMetadata().get()
                .finalizedFeatures().get("share.version");
            out.put("shareVersion", share == null ? 0 : share.maxVersionLevel());
            try {
                admin.describeShareGroups(List.of("dimster-health-probe")).all().get();
                out.put("shareGroupDescribe", "ok");
            } catch (Exception e) {
                Throwable cause = e.getCause() == null ? e : e.getCause();
                // The group coordinator answered for share groups: an unknown group is the expected answer.
                out.put("shareGroupDescribe", cause instanceof GroupIdNotFoundException ? "ok" : String.valueOf(cause));
            }
        }
        c.json(out);
        return 0;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Map<String, Object>> groupSpecs(String json) throws Exception {
        return JSON.readValue(json, Map.class);
    }

    /** Why a share group's members do not all hold their assignment yet, or null when they do: the
     *  expected number of members, each at the group's epoch (it has received the group's newest
     *  target assignment in a heartbeat response) with at least one partition. */
    static String shareGroupPending(ShareGroupDescription group, int expected) {
        Collection<ShareMemberDescription> members = group.members();
        if (members.size() != expected) return members.size() + " of " + expected + " members joined";
        if (group.targetAssignmentEpoch() != group.groupEpoch()) return "target assignment not computed yet";
        long holding = members.stream()
            .filter(m -> m.memberEpoch() == group.groupEpoch() && !m.assignment().topicPartitions().isEmpty())
            .count();
        return holding == expected ? null : holding + " of " + expected + " members hold an assignment";
    }

    /** The same for a consumer group: the expected members and the group Stable (every member has
     *  synced its assignment; for the consumer protocol, every member reconciled to the target). */
    static String consumerGroupPending(ConsumerGroupDescription group, int expected) {
        Collection<MemberDescription> members = group.members();
        if (members.size() != expected) return members.size() + " of " + expected + " members joined";
        if (group.groupState() != GroupState.STABLE) return "group is " + group.groupState();
        return null;
    }

    /** Until every group's members hold their assignment, the deadline, or the client's close. */
    static int awaitAssignment(Connection c, Admin client, long timeoutMs, String json) throws Exception {
        Map<String, Map<String, Object>> specs = groupSpecs(json);
        Map<String, String> pending = new LinkedHashMap<>();
        specs.keySet().forEach(g -> pending.put(g, "not described yet"));
        long deadline = System.currentTimeMillis() + timeoutMs;
        c.listen();
        try (Admin admin = client) {
            while (!pending.isEmpty() && !c.closed && System.currentTimeMillis() < deadline) {
                List<String> share = new ArrayList<>();
                List<String> consumer = new ArrayList<>();
                pending.keySet().forEach(g -> ("share".equals(specs.get(g).get("kind")) ? share : consumer).add(g));
                Map<String, String> why = new HashMap<>();
                try {
                    if (!share.isEmpty()) {
                        admin.describeShareGroups(share).all().get().forEach((g, d) ->
                            why.put(g, shareGroupPending(d, ((Number) specs.get(g).get("members")).intValue())));
                    }
                    if (!consumer.isEmpty()) {
                        admin.describeConsumerGroups(consumer).all().get().forEach((g, d) ->
                            why.put(g, consumerGroupPending(d, ((Number) specs.get(g).get("members")).intValue())));
                    }
                } catch (Exception e) {  // a group not known yet, a coordinator moving: ask again
                    Throwable cause = e.getCause() == null ? e : e.getCause();
                    pending.replaceAll((g, old) -> String.valueOf(cause.getMessage()));
                }
                for (Map.Entry<String, String> entry : why.entrySet()) {
                    if (entry.getValue() == null) {
                        pending.remove(entry.getKey());
                        Map<String, Object> line = new LinkedHashMap<>();
                        line.put("group", entry.getKey());
                        line.put("assignedAtMs", System.currentTimeMillis());
                        c.json(line);
                    } else {
                        pending.put(entry.getKey(), entry.getValue());
                    }
                }
                if (!pending.isEmpty()) Thread.sleep(100);
            }
        }
        Map<String, Object> last = new LinkedHashMap<>();
        if (pending.isEmpty()) {
            last.put("done", true);
        } else {
            last.put("timeout", true);
            last.put("pending", pending);
        }
        c.json(last);
        return pending.isEmpty() ? 0 : 3;
    }

    /** Per group, per partition: {"start": the group's start offset, "lag": records of the partition it
     *  has yet to consume}. A share group's lag is the broker's own (KIP-1226); a consumer group's runs
     *  from its committed offset to the end. A partition the group never started on lags from the log start. */
    static Map<String, Map<Integer, Map<String, Long>>> positions(Admin admin, Map<String, Map<String, Object>> specs)
            throws Exception {
        Map<String, Map<Integer, Map<String, Long>>> out = new LinkedHashMap<>();
        for (Map.Entry<String, Map<String, Object>> spec : specs.entrySet()) {
            String group = spec.getKey();
            String topic = (String) spec.getValue().get("topic");
            int partitions = ((Number) spec.getValue().get("partitions")).intValue();
            Set<TopicPartition> tps = new HashSet<>();
            for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
            tps.forEach(tp -> { latest.put(tp, OffsetSpec.latest()); earliest.put(tp, OffsetSpec.earliest()); });
            var ends = admin.listOffsets(latest).all().get();
            var starts = admin.listOffsets(earliest).all().get();
            Map<Integer, Map<String, Long>> byPartition = new LinkedHashMap<>();
            if ("share".equals(spec.getValue().get("kind"))) {
                Map<TopicPartition, SharePartitionOffsetInfo> infos = admin
                    .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(tps)))
                    .partitionsToOffsetInfo(group).get();
                for (TopicPartition tp : tps) {
                    SharePartitionOffsetInfo info = infos.get(tp);
                    long end = ends.get(tp).offset();
                    long start = info == null ? starts.get(tp).offset() : info.startOffset();
                    long lag = info == null ? end - start : info.lag().orElse(Math.max(0, end - start));
                    byPartition.put(tp.partition(), Map.of("start", start, "lag", lag));
                }
            } else {
                Map<TopicPartition, OffsetAndMetadata> committed = admin
                    .listConsumerGroupOffsets(Map.of(group, new ListConsumerGroupOffsetsSpec().topicPartitions(tps)))
                    .partitionsToOffsetAndMetadata(group).get();
                for (TopicPartition tp : tps) {
                    OffsetAndMetadata at = committed.get(tp);
                    long from = at == null ? starts.get(tp).offset() : at.offset();
                    byPartition.put(tp.partition(), Map.of("start", from, "lag", Math.max(0, ends.get(tp).offset() - from)));
                }
            }
            out.put(group, byPartition);
        }
        return out;
    }

    /** One JSON line every intervalMs, and at once after a line from the client, until it closes:
     *  {"atMs": ..., "groups": positions} or {"atMs": ..., "error": "..."} for a round the cluster did
     *  not answer. atMs is when the round started. */
    static int watchLag(Connection c, Admin client, long intervalMs, String json) throws Exception {
        Map<String, Map<String, Object>> specs = groupSpecs(json);
        c.listen();
        try (Admin admin = client) {
            while (!c.closed) {
                long started = System.currentTimeMillis();
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("atMs", started);
                try {
                    line.put("groups", positions(admin, specs));
                } catch (Exception e) {
                    Throwable cause = e.getCause() == null ? e : e.getCause();
                    line.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
                }
                c.json(line);
                c.pause(intervalMs - (System.currentTimeMillis() - started));  // a round starts after every request so far
            }
        }
        return 0;
    }
}
