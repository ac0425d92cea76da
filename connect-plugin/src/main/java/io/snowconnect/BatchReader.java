package io.snowconnect;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * A source batch from the executor as Connect records. A typed value is Connect's JSON envelope,
 * read by Connect's own {@link JsonConverter}; a schemaless one the row's JSON, read into a map
 * (what that converter makes of it, without the detour through its tree); the key is the row's sys_id as a string;
 * the batch's headers then the record's own are string headers. The batch's last record carries
 * the batch's new position; earlier ones the position before the batch (Connect may commit any
 * acknowledged record's offset, and a restart from one re-reads the batch: at-least-once).
 */
final class BatchReader {
    private final JsonConverter values = new JsonConverter();
    /** The last position handed to Connect per partition key (as the component wrote it). */
    private final Map<String, String> positions;

    BatchReader(Map<String, String> positions) {
        this.positions = positions;
        values.configure(Map.of("schemas.enable", "true", "converter.type", "value"), false);
    }

    /** A decoded batch: its records and its notice (null if none). */
    record Batch(String unit, List<SourceRecord> records, String notice) {}

    Batch read(byte[] body) {
        ByteBuffer b = ByteBuffer.wrap(body);
        String unit = str(b);
        String partitionKey = str(b);
        String position = opt(b);
        String topic = str(b);
        String notice = opt(b);
        int batchHeaders = Short.toUnsignedInt(b.getShort());
        String[][] shared = new String[batchHeaders][];
        for (int i = 0; i < batchHeaders; i++) {
            shared[i] = new String[] {str(b), opt(b)};
        }
        int count = b.getInt();
        List<SourceRecord> records = new ArrayList<>(count);
        Map<String, Object> partition = partitionKey.isEmpty() ? null : Offsets.partition(partitionKey);
        Map<String, Object> before = partitionKey.isEmpty() ? null : Offsets.offset(positions.get(partitionKey));
        Map<String, Object> after = position == null ? before : Offsets.offset(position);
        for (int i = 0; i < count; i++) {
            String key = opt(b);
            SchemaAndValue typed = value(b, topic);
            long ts = b.getLong();
            ConnectHeaders headers = new ConnectHeaders();
            for (String[] h : shared) {
                headers.add(h[0], h[1], Schema.OPTIONAL_STRING_SCHEMA);
            }
            int own = Short.toUnsignedInt(b.getShort());
            for (int h = 0; h < own; h++) {
                headers.add(str(b), opt(b), Schema.OPTIONAL_STRING_SCHEMA);
            }
            Map<String, Object> offset = i == count - 1 ? after : before;
            records.add(new SourceRecord(partition, offset, topic, null, key == null ? null : Schema.STRING_SCHEMA, key,
                typed.schema(), typed.value(), ts == Long.MIN_VALUE ? null : ts, headers));
        }
        if (b.hasRemaining()) {
            throw new ConnectException("a batch from the executor has " + b.remaining() + " bytes after its records");
        }
        if (position != null && count > 0) {
            positions.put(partitionKey, position);
        }
        return new Batch(unit, records, notice);
    }

    /** A value as it travels: null, the row's JSON (read into a schemaless map), or Connect's envelope of the typed row. */
    private SchemaAndValue value(ByteBuffer b, String topic) {
        byte tag = b.get();
        switch (tag) {
            case 0:
                return SchemaAndValue.NULL;
            case 1: {
                int n = b.getInt();
                try {
                    Object row = Json.MAPPER.readValue(b.array(), b.position(), n, Object.class);
                    b.position(b.position() + n);
                    return new SchemaAndValue(null, row);
                } catch (java.io.IOException e) {
                    throw new ConnectException("a row from the executor is not JSON: " + e.getMessage(), e);
                }
            }
            case 2:
                return values.toConnectData(topic, optBytes(b));
            default:
                throw new ConnectException("a value of unknown kind " + tag + " from the executor");
        }
    }

    private static String str(ByteBuffer b) {
        int n = b.getInt();
        String s = new String(b.array(), b.position(), n, StandardCharsets.UTF_8);
        b.position(b.position() + n);
        return s;
    }

    private static byte[] optBytes(ByteBuffer b) {
        int n = b.getInt();
        if (n < 0) {
            return null;
        }
        byte[] out = new byte[n];
        b.get(out);
        return out;
    }

    private static String opt(ByteBuffer b) {
        byte[] bytes = optBytes(b);
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }
}
