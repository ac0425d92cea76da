package io.snowconnect;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Type;

/**
 * The keys Connect shows for our connectors. Every other {@code snow.*} key of
 * docs/configuration.md is passed through as written and checked by the component itself
 * (its errors come back attached to their keys in {@code validate}).
 */
final class ConnectorKeys {
    private ConnectorKeys() {}

    static ConfigDef source() {
        return common()
            .define("snow.tables", Type.STRING, ConfigDef.NO_DEFAULT_VALUE, Importance.HIGH,
                "The tables (or views) to read, comma-separated; each may be configured under snow.table.<name>.*")
            .define("snow.topic.prefix", Type.STRING, null, Importance.MEDIUM,
                "The prefix of each table's topic (<prefix><table>, default snow.) unless snow.table.<name>.topic names it");
    }

    static ConfigDef sink() {
        return common();
    }

    private static ConfigDef common() {
        return new ConfigDef()
            .define("snow.instance.url", Type.STRING, ConfigDef.NO_DEFAULT_VALUE, Importance.HIGH,
                "The instance URL, e.g. https://acme.service-now.com")
            .define("snow.auth.type", Type.STRING, null, Importance.HIGH, "basic or oauth")
            .define("snow.auth.username", Type.STRING, null, Importance.HIGH, "The integration user (basic)")
            .define("snow.auth.password", Type.PASSWORD, null, Importance.HIGH,
                "The integration user's password; give it through one of Connect's config providers")
            .define("component.path", Type.STRING, null, Importance.LOW,
                "The component to run: the plugin's own (components/) unless set; only files under the plugin's "
                    + "component.paths are allowed, and each must be signed by a key the plugin trusts");
    }
}
