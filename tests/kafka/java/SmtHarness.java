// Runs Kafka Connect 4.1.1's own transforms and predicates on records given as JSON, so that our
// Rust implementation (snow-data/src/transform) is compared record for record with Connect's
// (snow-data/tests/connect_parity.rs). One case per line on stdin:
//   {"config": {"transforms": "...", "transforms.x.type": "...", ...},
//    "record": {"topic": "t", "partition": 0, "offset": 5 (sink records; absent: a source record),
//               "key": <JsonConverter envelope or null>, "value": <envelope or null>,
//               "timestamp": 1700000000123 or null, "headers": [{"key": "h", "value": <envelope>}]}}
// One answer per line on stdout: {"dropped": true} | {"error": "<exception message>"} |
// {"record": {... the same shape ...}}. Stages are built as ConnectorConfig builds them
// (prefix stripped, predicate and negate taken out, one predicate instance per stage) and run as
// TransformationStage runs them. The JVM's time zone is set to UTC by the caller.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.Predicate;

public class SmtHarness {
    static final ObjectMapper JSON = new ObjectMapper();
    static final JsonConverter CONVERTER = new JsonConverter();

    static SchemaAndValue toConnect(JsonNode envelope) throws Exception {
        if (envelope == null || envelope.isNull()) return SchemaAndValue.NULL;
        return CONVERTER.toConnectData("t", JSON.writeValueAsBytes(envelope));
    }

    static JsonNode fromConnect(org.apache.kafka.connect.data.Schema schema, Object value) throws Exception {
        byte[] bytes = CONVERTER.fromConnectData("t", schema, value);
        return bytes == null ? JSON.nullNode() : JSON.readTree(bytes);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static ConnectRecord<?> record(JsonNode r) throws Exception {
        SchemaAndValue key = toConnect(r.get("key"));
        SchemaAndValue value = toConnect(r.get("value"));
        ConnectHeaders headers = new ConnectHeaders();
        if (r.has("headers")) {
            for (JsonNode h : r.get("headers")) {
                SchemaAndValue hv = toConnect(h.get("value"));
                headers.add(h.get("key").asText(), hv.value(), hv.schema());
            }
        }
        String topic = r.get("topic").asText();
        Integer partition = r.hasNonNull("partition") ? r.get("partition").asInt() : null;
        Long timestamp = r.hasNonNull("timestamp") ? r.get("timestamp").asLong() : null;
        if (r.hasNonNull("offset")) {
            return new SinkRecord(topic, partition == null ? 0 : partition, key.schema(), key.value(), value.schema(), value.value(),
                r.get("offset").asLong(), timestamp, org.apache.kafka.common.record.TimestampType.CREATE_TIME, headers);
        }
        return new SourceRecord(null, null, topic, partition, key.schema(), key.value(), value.schema(), value.value(), timestamp, headers);
    }

    static JsonNode answer(ConnectRecord<?> r) throws Exception {
        ObjectNode out = JSON.createObjectNode();
        out.put("topic", r.topic());
        if (r.kafkaPartition() != null) out.put("partition", r.kafkaPartition()); else out.putNull("partition");
        if (r.timestamp() != null) out.put("timestamp", r.timestamp()); else out.putNull("timestamp");
        out.set("key", fromConnect(r.keySchema(), r.key()));
        out.set("value", fromConnect(r.valueSchema(), r.value()));
        List<JsonNode> headers = new ArrayList<>();
        for (Header h : r.headers()) {
            ObjectNode hn = JSON.createObjectNode();
            hn.put("key", h.key());
            hn.set("value", fromConnect(h.schema(), h.value()));
            headers.add(hn);
        }
        out.set("headers", JSON.valueToTree(headers));
        return out;
    }

    static Map<String, Object> withPrefix(Map<String, String> config, String prefix) {
        Map<String, Object> out = new HashMap<>();
        config.forEach((k, v) -> { if (k.startsWith(prefix)) out.put(k.substring(prefix.length()), v); });
        return out;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static JsonNode run(JsonNode c) throws Exception {
        Map<String, String> config = JSON.convertValue(c.get("config"), Map.class);
        ConnectRecord record = record(c.get("record"));
        String list = config.getOrDefault("transforms", "").trim();
        for (String alias : list.isEmpty() ? new String[0] : list.split("\\s*,\\s*")) {
            Map<String, Object> own = withPrefix(config, "transforms." + alias + ".");
            String type = (String) own.remove("type");
            String predicateAlias = (String) own.remove("predicate");
            Object negate = own.remove("negate");
            Transformation t = (Transformation) Class.forName(type).getDeclaredConstructor().newInstance();
            t.configure(own);
            boolean run = true;
            if (predicateAlias != null) {
                Map<String, Object> pconf = withPrefix(config, "predicates." + predicateAlias + ".");
                Predicate p = (Predicate) Class.forName((String) pconf.remove("type")).getDeclaredConstructor().newInstance();
                p.configure(pconf);
                run = (negate != null && Boolean.parseBoolean(negate.toString())) ^ p.test(record);
            }
            if (run) record = t.apply(record);
            if (record == null) return JSON.createObjectNode().put("dropped", true);
        }
        return JSON.createObjectNode().set("record", answer(record));
    }

    public static void main(String[] args) throws Exception {
        CONVERTER.configure(Map.of("schemas.enable", "true", "converter.type", "value"));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode out;
            try {
                out = run(JSON.readTree(line));
            } catch (Throwable e) {
                Throwable cause = e;
                while (cause.getCause() != null && cause.getMessage() == null) cause = cause.getCause();
                out = JSON.createObjectNode().put("error", String.valueOf(cause.getMessage()));
            }
            System.out.println(JSON.writeValueAsString(out));
        }
    }
}
