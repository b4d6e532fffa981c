// Small bridge into the fetched Kafka jars, compiled once per Kafka version by dimster.
//   configdefs                       -> JSON of every broker config key: type, default, update mode
//   validate FILE                    -> checks a server.properties with Kafka's own KafkaConfig
//   share-health BOOTSTRAP           -> JSON: finalized share.version and a share group describe
//   alter-broker-configs BOOTSTRAP J -> incremental alter of broker configs; J is JSON
//                                       {"<broker id, or empty for the cluster default>": {key: value|null}}
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileReader;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
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

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
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
}
