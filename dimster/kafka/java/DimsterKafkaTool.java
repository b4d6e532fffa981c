// Small bridge into the fetched Kafka jars, compiled once per Kafka version by dimster.
//   configdefs                       -> JSON of every broker config key: type, default, update mode
//   validate FILE                    -> checks a server.properties with Kafka's own KafkaConfig
//   share-health BOOTSTRAP           -> JSON: finalized share.version and a share group describe
//   alter-broker-configs BOOTSTRAP J -> incremental alter of broker configs; J is JSON
//                                       {"<broker id, or empty for the cluster default>": {key: value|null}}
//   await-assignment BOOTSTRAP MS J  -> one JSON line per group as soon as every member the group should
//                                       have holds its assignment, then {"done": true}; J is JSON
//                                       {"<group>": {"kind": "share"|"consumer", "members": N}}; after MS
//                                       milliseconds {"timeout": true, "pending": {"<group>": "why"}}
//   watch-lag BOOTSTRAP MS J         -> every MS milliseconds, and at once after each line read from
//                                       stdin, one JSON line: per group and partition the group's start
//                                       offset and lag (records of its topic it has yet to consume; share
//                                       groups: the share-partition lag); J as above; ends when stdin closes
// The Admin client of each command also takes the JSON object in $DIMSTER_CLIENT_CONFIG, when set: the
// cluster's security properties, which never go on a command line.
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileReader;
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
import java.util.concurrent.TimeUnit;
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
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "configdefs" -> configDefs();
            case "validate" -> validate(args[1]);
            case "share-health" -> shareHealth(args[1]);
            case "alter-broker-configs" -> alterBrokerConfigs(args[1], args[2]);
            case "await-assignment" -> awaitAssignment(args[1], Long.parseLong(args[2]), args[3]);
            case "watch-lag" -> watchLag(args[1], Long.parseLong(args[2]), args[3]);
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static void configDefs() throws Exception {
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
        System.out.println(new ObjectMapper().writeValueAsString(out));
    }

    static void validate(String file) throws Exception {
        Properties props = new Properties();
        try (FileReader reader = new FileReader(file)) {
            props.load(reader);
        }
        try {
            kafka.server.KafkaConfig.fromProps(props, false);
        } catch (Exception e) {
            System.out.println(e.getMessage());
            System.exit(1);
        }
    }

    @SuppressWarnings("unchecked")
    static Admin admin(String bootstrap) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        String security = System.getenv("DIMSTER_CLIENT_CONFIG");
        if (security != null && !security.isEmpty()) {
            props.putAll(new ObjectMapper().readValue(security, Map.class));
        }
        return Admin.create(props);
    }

    @SuppressWarnings("unchecked")
    static void alterBrokerConfigs(String bootstrap, String json) throws Exception {
        Map<String, Map<String, String>> wanted = new ObjectMapper().readValue(json, Map.class);
        Map<ConfigResource, Collection<AlterConfigOp>> ops = new LinkedHashMap<>();
        wanted.forEach((broker, configs) -> {
            List<AlterConfigOp> list = new ArrayList<>();
            configs.forEach((key, value) -> list.add(value == null
                ? new AlterConfigOp(new ConfigEntry(key, null), AlterConfigOp.OpType.DELETE)
                : new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.SET)));
            ops.put(new ConfigResource(ConfigResource.Type.BROKER, broker), list);
        });
        try (Admin admin = admin(bootstrap)) {
            admin.incrementalAlterConfigs(ops).all().get();
        } catch (Exception e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            System.out.println(cause.getMessage());
            System.exit(1);
        }
    }

    static void shareHealth(String bootstrap) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = admin(bootstrap)) {
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
        System.out.println(new ObjectMapper().writeValueAsString(out));
    }

    @SuppressWarnings("unchecked")
    static Map<String, Map<String, Object>> groupSpecs(String json) throws Exception {
        return new ObjectMapper().readValue(json, Map.class);
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

    static void awaitAssignment(String bootstrap, long timeoutMs, String json) throws Exception {
        Map<String, Map<String, Object>> specs = groupSpecs(json);
        ObjectMapper mapper = new ObjectMapper();
        Map<String, String> pending = new LinkedHashMap<>();
        specs.keySet().forEach(g -> pending.put(g, "not described yet"));
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (Admin admin = admin(bootstrap)) {
            while (!pending.isEmpty() && System.currentTimeMillis() < deadline) {
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
                        System.out.println(mapper.writeValueAsString(line));
                        System.out.flush();
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
        System.out.println(mapper.writeValueAsString(last));
        System.out.flush();
        System.exit(pending.isEmpty() ? 0 : 3);
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

    /** One JSON line every intervalMs, and at once after a line on stdin, until stdin closes:
     *  {"atMs": ..., "groups": positions} or {"atMs": ..., "error": "..."} for a round the cluster did
     *  not answer. atMs is when the round started. */
    static void watchLag(String bootstrap, long intervalMs, String json) throws Exception {
        Map<String, Map<String, Object>> specs = groupSpecs(json);
        ObjectMapper mapper = new ObjectMapper();
        Semaphore asked = new Semaphore(0);
        Thread watchStdin = new Thread(() -> {
            try {
                for (int c = System.in.read(); c >= 0; c = System.in.read()) {
                    if (c == '\n') asked.release();
                }
            } catch (Exception ignored) { }
            System.exit(0);
        });
        watchStdin.setDaemon(true);
        watchStdin.start();
        try (Admin admin = admin(bootstrap)) {
            while (true) {
                long started = System.currentTimeMillis();
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("atMs", started);
                try {
                    line.put("groups", positions(admin, specs));
                } catch (Exception e) {
                    Throwable cause = e.getCause() == null ? e : e.getCause();
                    line.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
                }
                System.out.println(mapper.writeValueAsString(line));
                System.out.flush();
                asked.tryAcquire(Math.max(0, intervalMs - (System.currentTimeMillis() - started)), TimeUnit.MILLISECONDS);
                asked.drainPermits();  // a round starts now, after every request so far
            }
        }
    }
}
