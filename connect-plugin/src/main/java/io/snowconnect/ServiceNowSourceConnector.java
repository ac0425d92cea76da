package io.snowconnect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * ServiceNow → Kafka inside Kafka Connect: the same signed {@code guest_source.wasm} our own
 * runtime runs, driven through a {@code snow-connect task-executor} child process (ADR 0037).
 * Connect owns offsets, Kafka I/O, converters, transforms and the group; the executor owns the
 * component, its signature check, credentials, the outbound gate and the trap budget.
 */
public class ServiceNowSourceConnector extends SourceConnector {
    /** The task configuration key carrying a task's units (JSON, from the component's plan). */
    static final String UNITS = "snow.connect.task.units";
    /**
     * How many tasks the connector runs: each task's executor spends its share of the instance's
     * request budget (each task is a process of its own, so the budget is divided among them).
     */
    static final String TASKS = "snow.connect.task.count";

    private Map<String, String> props;

    @Override
    public String version() {
        return PluginVersion.VERSION;
    }

    @Override
    public void start(Map<String, String> props) {
        this.props = new HashMap<>(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return ServiceNowSourceTask.class;
    }

    /** Asks the component to plan its tables over at most {@code maxTasks} tasks. */
    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        JsonNode tasks = plan(props, maxTasks);
        List<Map<String, String>> configs = new ArrayList<>();
        for (JsonNode units : tasks.path("tasks")) {
            if (units.isEmpty()) {
                continue;
            }
            Map<String, String> config = new HashMap<>(props);
            config.put(UNITS, Json.text(units));
            configs.add(config);
        }
        for (Map<String, String> config : configs) {
            config.put(TASKS, Integer.toString(configs.size()));
        }
        return configs;
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return ConnectorKeys.source();
    }

    /** Connect's validation, with the component's own errors attached to their keys. */
    @Override
    public Config validate(Map<String, String> connectorConfigs) {
        return Validation.withComponent(super.validate(connectorConfigs), "source", connectorConfigs);
    }

    @Override
    public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> connectorConfig) {
        // A task's records and the offset of its last one are committed together by Connect.
        return ExactlyOnceSupport.SUPPORTED;
    }

    static byte[] planRequest(String kind, Map<String, String> config, int maxTasks) {
        Map<String, Object> request = new LinkedHashMap<>();
        request.put("kind", kind);
        // Connect's validate may come before the connector has a name.
        Map<String, String> named = new HashMap<>(config);
        named.putIfAbsent("name", "validate");
        request.put("config", named);
        request.put("max_tasks", maxTasks);
        return Json.bytes(request);
    }

    static JsonNode plan(Map<String, String> props, int maxTasks) {
        try (Executor executor = Executor.start(PluginHome.locate(), "plan")) {
            Executor.Answer answer = executor.request(Executor.PLAN, planRequest("source", props, maxTasks));
            if (answer.kind() != Executor.JSON) {
                throw new ConnectException("planning the connector's tables: " + Executor.message(answer));
            }
            return Json.parse(answer.body());
        }
    }
}
