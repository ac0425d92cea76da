package io.snowconnect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One Connect source task: its tables run in one executor, opened at the offsets Connect stored
 * for every partition their positions may be kept under; each {@link #poll()} hands over one batch.
 */
public class ServiceNowSourceTask extends SourceTask {
    private static final Logger LOG = LoggerFactory.getLogger(ServiceNowSourceTask.class);

    private Executor executor;
    private BatchReader reader;
    private final Map<String, String> notices = new HashMap<>();
    private volatile boolean stopping;

    @Override
    public String version() {
        return PluginVersion.VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        JsonNode units = Json.parse(props.getOrDefault(ServiceNowSourceConnector.UNITS, "[]").getBytes(java.nio.charset.StandardCharsets.UTF_8));
        Map<String, String> config = new HashMap<>(props);
        config.remove(ServiceNowSourceConnector.UNITS);
        String tasks = config.remove(ServiceNowSourceConnector.TASKS);
        List<String> keys = new ArrayList<>();
        for (JsonNode unit : units) {
            for (JsonNode key : unit.path("partitions")) {
                keys.add(key.asText());
            }
        }
        Map<String, String> positions = storedPositions(keys);
        Map<String, Object> open = new LinkedHashMap<>();
        open.put("config", config);
        open.put("units", units);
        open.put("offsets", positions);
        open.put("tasks", tasks == null ? 1 : Integer.parseInt(tasks));
        String name = props.getOrDefault("name", "source");
        executor = Executor.start(PluginHome.locate(), name);
        Executor.Answer answer = executor.request(Executor.OPEN_SOURCE, Json.bytes(open));
        if (answer.kind() != Executor.JSON) {
            executor.close();
            throw new ConnectException("opening the task's tables: " + Executor.message(answer));
        }
        reader = new BatchReader(new HashMap<>(positions));
        LOG.info("snow-connect task of {} opened: {} tables, {} stored positions", name, units.size(), positions.size());
    }

    /**
     * The positions Connect holds for {@code keys}: stored under Connect's own map order, or else
     * under the order our own worker writes (a connector moved from it keeps its place).
     */
    private Map<String, String> storedPositions(List<String> keys) {
        Map<String, String> positions = new LinkedHashMap<>();
        var reader = context.offsetStorageReader();
        for (boolean legacy : new boolean[] {false, true}) {
            List<Map<String, Object>> asked = new ArrayList<>();
            for (String key : keys) {
                if (!positions.containsKey(key)) {
                    asked.add(legacy ? Offsets.legacyPartition(key) : Offsets.partition(key));
                }
            }
            if (asked.isEmpty()) {
                break;
            }
            Map<Map<String, Object>, Map<String, Object>> stored = reader.offsets(asked);
            for (String key : keys) {
                Map<String, Object> offset = stored.get(Offsets.partition(key));
                if (offset != null && !positions.containsKey(key)) {
                    positions.put(key, Offsets.position(offset));
                }
            }
        }
        return positions;
    }

    @Override
    public List<SourceRecord> poll() {
        if (stopping) {
            return null;
        }
        Executor.Answer answer = executor.request(Executor.NEXT, new byte[0]);
        switch (answer.kind()) {
            case Executor.EMPTY:
                return null;
            case Executor.BATCH:
                BatchReader.Batch batch = reader.read(answer.body());
                String notice = batch.notice();
                String before = notice == null ? notices.remove(batch.unit()) : notices.put(batch.unit(), notice);
                if (notice != null && !notice.equals(before)) {
                    LOG.warn("table {}: {}", batch.unit(), notice);
                }
                return batch.records().isEmpty() ? null : batch.records();
            case Executor.FAILED:
                if (stopping) {
                    return null;
                }
                throw new ConnectException(Executor.message(answer));
            default:
                throw new ConnectException("the snow-connect executor answered a poll with kind " + (char) answer.kind());
        }
    }

    @Override
    public void stop() {
        stopping = true;
        if (executor != null) {
            executor.close();
        }
    }
}
