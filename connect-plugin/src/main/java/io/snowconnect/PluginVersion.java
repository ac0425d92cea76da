package io.snowconnect;

/** The plugin's version (the executor's release it ships with). */
final class PluginVersion {
    static final String VERSION = "0.1.0";

    private PluginVersion() {}
}
