package io.snowconnect;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.kafka.connect.json.JsonConverter;

/**
 * Our partition keys and positions as Connect's source partition and offset maps, in the shape our
 * own worker writes to its offsets topic ({@code ["<connector>", <partition>]} → {@code <position>}):
 * a key or position that is a JSON object is that object (member order kept), anything else is
 * {@code {"position": text}}.
 *
 * <p>Connect keys its offsets by the bytes its converter writes for the partition map, and its own
 * tools (KIP-875's {@code GET}/{@code PATCH}/{@code DELETE .../offsets}) rebuild partition maps by
 * reading those bytes back with its {@link JsonConverter}: so a record's partition map is made by
 * that same converter from our key (its members then come out in the order Connect's tools write),
 * and an offset our own worker stored (members in our order) is read under that order as well
 * ({@link #legacyPartition}).
 */
final class Offsets {
    private Offsets() {}

    private static final JsonConverter MAPS = new JsonConverter();

    static {
        MAPS.configure(Map.of("schemas.enable", "false", "converter.type", "key"), true);
    }

    /** A partition key as the map Connect stores records' offsets under (as its tools read it back). */
    @SuppressWarnings("unchecked")
    static Map<String, Object> partition(String key) {
        if (Json.object(key) == null) {
            return wrapped("partition", key);
        }
        Object map = MAPS.toConnectData("", key.getBytes(StandardCharsets.UTF_8)).value();
        return (Map<String, Object>) map;
    }

    /** A partition key as our own worker's offsets topic holds it (members in the key's order). */
    static Map<String, Object> legacyPartition(String key) {
        Map<String, Object> map = Json.object(key);
        return map != null ? map : wrapped("partition", key);
    }

    static Map<String, Object> offset(String position) {
        if (position == null) {
            return null;
        }
        Map<String, Object> map = Json.object(position);
        return map != null ? map : wrapped("position", position);
    }

    /** A stored offset map back as the position text the component reads. */
    static String position(Map<String, Object> offset) {
        if (offset.size() == 1 && offset.get("position") instanceof String text) {
            return text;
        }
        return Json.text(offset);
    }

    private static Map<String, Object> wrapped(String name, String text) {
        Map<String, Object> map = new LinkedHashMap<>();
        map.put(name, text);
        return map;
    }
}
