package io.snowconnect;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.connect.errors.ConnectException;

/** The small JSON of the protocol and of offsets (Jackson, which Connect's runtime carries). */
final class Json {
    static final ObjectMapper MAPPER = new ObjectMapper();

    private Json() {}

    static JsonNode parse(byte[] bytes) {
        try {
            return MAPPER.readTree(bytes);
        } catch (IOException e) {
            throw new ConnectException("the snow-connect executor answered with broken JSON: " + e.getMessage(), e);
        }
    }

    static byte[] bytes(Object value) {
        try {
            return MAPPER.writeValueAsBytes(value);
        } catch (IOException e) {
            throw new ConnectException("writing JSON: " + e.getMessage(), e);
        }
    }

    static String text(Object value) {
        try {
            return MAPPER.writeValueAsString(value);
        } catch (IOException e) {
            throw new ConnectException("writing JSON: " + e.getMessage(), e);
        }
    }

    /** A JSON object's text as a map keeping its member order (a partition key's order is part of it). */
    static Map<String, Object> object(String text) {
        try {
            return MAPPER.readValue(text, new TypeReference<LinkedHashMap<String, Object>>() {});
        } catch (IOException e) {
            return null;
        }
    }
}
