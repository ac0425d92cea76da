package io.snowconnect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * Kafka → ServiceNow inside Kafka Connect: the same signed {@code guest_sink.wasm} our own runtime
 * runs, driven through a {@code snow-connect task-executor} child process per task (ADR 0037).
 */
public class ServiceNowSinkConnector extends SinkConnector {
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
        return ServiceNowSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> configs = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) {
            Map<String, String> config = new HashMap<>(props);
            config.put(ServiceNowSourceConnector.TASKS, Integer.toString(maxTasks));
            configs.add(config);
        }
        return configs;
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return ConnectorKeys.sink();
    }

    @Override
    public Config validate(Map<String, String> connectorConfigs) {
        return Validation.withComponent(super.validate(connectorConfigs), "sink", connectorConfigs);
    }
}
