package io.snowconnect;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Our partition keys and positions as Connect's source partition and offset maps, in the shape our
 * own worker writes to its offsets topic ({@code ["<connector>", <partition>]} → {@code <position>}):
 * a key or position that is a JSON object is that object (member order kept), anything else is
 * {@code {"position": text}}. So a connector moved between our worker and Connect keeps its place.
 */
final class Offsets {
    private Offsets() {}

    static Map<String, Object> partition(String key) {
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
