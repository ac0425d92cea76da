package io.snowconnect;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Values;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.RetriableException;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.ErrantRecordReporter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One Connect sink task: {@link #put} hands the records to the executor, which writes each
 * partition in offset order and answers every record's outcome before put returns (so what Connect
 * commits was written). A record that failed and may be passed goes to Connect's errant record
 * reporter (its dead letter queue); a retryable failure makes Connect hand the same records again
 * (those already written are not written twice); an intolerable one fails the task.
 */
public class ServiceNowSinkTask extends SinkTask {
    private static final Logger LOG = LoggerFactory.getLogger(ServiceNowSinkTask.class);
    private static final long RETRY_MS = 1000;

    private Executor executor;
    private ErrantRecordReporter reporter;
    private final JsonConverter json = new JsonConverter();

    @Override
    public String version() {
        return PluginVersion.VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        json.configure(Map.of("schemas.enable", "false", "converter.type", "value"), false);
        try {
            reporter = context.errantRecordReporter();
        } catch (NoSuchMethodError | NoClassDefFoundError e) {
            reporter = null;
        }
        Map<String, String> config = new java.util.HashMap<>(props);
        String tasks = config.remove(ServiceNowSourceConnector.TASKS);
        Map<String, Object> open = new LinkedHashMap<>();
        open.put("config", config);
        open.put("tasks", tasks == null ? 1 : Integer.parseInt(tasks));
        executor = Executor.start(PluginHome.locate(), props.getOrDefault("name", "sink"));
        Executor.Answer answer = executor.request(Executor.OPEN_SINK, Json.bytes(open));
        if (answer.kind() != Executor.JSON) {
            executor.close();
            throw new ConnectException("opening the sink task: " + Executor.message(answer));
        }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        if (records.isEmpty()) {
            return;
        }
        List<SinkRecord> list = new ArrayList<>(records);
        Executor.Answer answer = executor.request(Executor.PUT, encode(list));
        if (answer.kind() != Executor.OUTCOMES) {
            throw new ConnectException("writing to ServiceNow: " + Executor.message(answer));
        }
        ByteBuffer b = ByteBuffer.wrap(answer.body());
        int count = b.getInt();
        if (count != list.size()) {
            throw new ConnectException("the executor answered " + count + " outcomes for " + list.size() + " records");
        }
        String held = null;
        for (SinkRecord record : list) {
            int status = b.get();
            int n = b.getInt();
            String message = new String(b.array(), b.position(), n, StandardCharsets.UTF_8);
            b.position(b.position() + n);
            switch (status) {
                case 0 -> { }
                case 1 -> {
                    if (reporter != null) {
                        reporter.report(record, new ConnectException(message));
                    } else {
                        LOG.warn("record {}-{}@{} failed and is passed: {}", record.topic(), record.kafkaPartition(), record.kafkaOffset(), message);
                    }
                }
                case 2 -> held = held == null ? message : held;
                default -> throw new ConnectException(message);
            }
        }
        if (held != null) {
            context.timeout(RETRY_MS);
            throw new RetriableException(held);
        }
    }

    private byte[] encode(List<SinkRecord> records) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(records.size());
            for (SinkRecord r : records) {
                str(out, r.topic());
                out.writeInt(r.kafkaPartition() == null ? 0 : r.kafkaPartition());
                out.writeLong(r.kafkaOffset());
                opt(out, part(r.topic(), r.keySchema(), r.key()));
                opt(out, part(r.topic(), r.valueSchema(), r.value()));
                out.writeLong(r.timestamp() == null ? Long.MIN_VALUE : r.timestamp());
                List<Header> headers = new ArrayList<>();
                r.headers().forEach(headers::add);
                out.writeShort(headers.size());
                for (Header h : headers) {
                    str(out, h.key());
                    String text = h.value() == null ? null : Values.convertToString(h.schema(), h.value());
                    opt(out, text == null ? null : text.getBytes(StandardCharsets.UTF_8));
                }
            }
        } catch (IOException e) {
            throw new ConnectException("encoding records: " + e.getMessage(), e);
        }
        return bytes.toByteArray();
    }

    /** A key or value as the component reads it: text as its bytes, bytes as they are, anything else as JSON. */
    private byte[] part(String topic, org.apache.kafka.connect.data.Schema schema, Object value) {
        if (value == null) {
            return null;
        }
        if (value instanceof String text) {
            return text.getBytes(StandardCharsets.UTF_8);
        }
        if (value instanceof byte[] raw) {
            return raw;
        }
        return json.fromConnectData(topic, schema, value);
    }

    private static void str(DataOutputStream out, String s) throws IOException {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        out.writeInt(b.length);
        out.write(b);
    }

    private static void opt(DataOutputStream out, byte[] b) throws IOException {
        if (b == null) {
            out.writeInt(-1);
        } else {
            out.writeInt(b.length);
            out.write(b);
        }
    }

    @Override
    public void stop() {
        if (executor != null) {
            executor.close();
        }
    }
}
