package io.snowconnect;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.connect.errors.ConnectException;

/**
 * The keys Connect shows for our connectors: the list the host documents (docs/configuration.md,
 * turned into {@code keys.tsv} when the plugin is built by connect-plugin/keys.py), less the keys
 * Connect owns and those with no place inside it. Keys of one table ({@code snow.table.<t>.*})
 * pass through as written; the component checks every key itself, and its errors come back
 * attached to their keys in {@code validate}.
 */
final class ConnectorKeys {
    private ConnectorKeys() {}

    static ConfigDef source() {
        return of("source");
    }

    static ConfigDef sink() {
        return of("sink");
    }

    private static ConfigDef of(String kind) {
        ConfigDef def = new ConfigDef();
        try (InputStream in = ConnectorKeys.class.getResourceAsStream("keys.tsv")) {
            if (in == null) {
                throw new ConnectException("the plugin jar has no keys.tsv (built by connect-plugin/keys.py)");
            }
            BufferedReader lines = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
            String line;
            while ((line = lines.readLine()) != null) {
                String[] cells = line.split("\t", 4);
                if (cells.length < 4 || !(cells[0].equals("both") || cells[0].equals(kind))) {
                    continue;
                }
                String key = cells[1];
                boolean secret = key.endsWith("password") || key.endsWith("secret") || key.endsWith("keystore.key");
                boolean required = cells[2].startsWith("required");
                String doc = cells[3] + (cells[2].isEmpty() ? "" : " (default: " + cells[2] + ")");
                def.define(key, secret ? Type.PASSWORD : Type.STRING, null, required ? Importance.HIGH : Importance.MEDIUM, doc);
            }
        } catch (IOException e) {
            throw new ConnectException("reading the plugin's key list: " + e.getMessage(), e);
        }
        return def;
    }
}
