package io.snowconnect;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigValue;

/** Connect's validation of a configuration with the executor's and the component's errors attached to their keys. */
final class Validation {
    private Validation() {}

    static Config withComponent(Config config, String kind, Map<String, String> connectorConfigs) {
        Map<String, ConfigValue> byKey = new LinkedHashMap<>();
        config.configValues().forEach(v -> byKey.put(v.name(), v));
        try (Executor executor = Executor.start(PluginHome.locate(), "validate")) {
            Executor.Answer answer = executor.request(Executor.PLAN, ServiceNowSourceConnector.planRequest(kind, connectorConfigs, 1));
            if (answer.kind() == Executor.FAILED) {
                List<String[]> errors = Executor.errors(answer);
                if (errors.isEmpty()) {
                    // Not a key's problem (the component refused by its signature, say): shown on component.path.
                    errors = List.<String[]>of(new String[] {"component.path", Executor.message(answer)});
                }
                for (String[] e : errors) {
                    String key = e[0].isEmpty() ? "component.path" : e[0];
                    byKey.computeIfAbsent(key, k -> new ConfigValue(k)).addErrorMessage(e[1]);
                }
            }
        }
        return new Config(new ArrayList<>(byKey.values()));
    }
}
