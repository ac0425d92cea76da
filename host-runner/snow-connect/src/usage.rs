//! What `snow-connect help` prints, and every usage error ends with.

pub const USAGE: &str = "usage:
  snow-connect run <connector file>... [--for-seconds N] [--status-listen HOST:PORT] [--rest HOST:PORT] [--component-cache DIR|off]
  snow-connect worker --config worker.properties [--component-cache DIR|off]
  snow-connect component push <component.wasm> --config worker.properties [--bundle FILE]
                                                         (stores it in the fleet's component.storage.topic; prints its component.ref)
  snow-connect validate <connector file>... [--component-cache DIR|off]
  snow-connect topic count KAFKA --topic NAME [--timeout-seconds N]
  snow-connect topic produce KAFKA --topic NAME [--key-field FIELD] [--file PATH]
  snow-connect offsets list (--file OFFSETS.json | --topic NAME KAFKA) [--connector NAME]
  snow-connect offsets reset (--file OFFSETS.json | --topic NAME KAFKA) --connector NAME [--table TABLE]
    KAFKA: --bootstrap HOST:PORT and/or --command-config FILE (Kafka's client keys, for example the
    security settings of worker.properties, which itself will do)
  snow-connect inspect <component.wasm> [--instantiations N] [--trusted-keys PUB[,PUB]] [--bundle FILE]
  snow-connect artefact keygen <prefix>                  (writes <prefix>.key, mode 0600, and <prefix>.pub)
  snow-connect artefact sign <component.wasm> --key FILE [--bundle OUT]
  snow-connect artefact verify <component.wasm> --trusted-keys PUB[,PUB] [--bundle FILE] [--trusted-root FILE]
  snow-connect artefact push <component.wasm> oci://REGISTRY/REPOSITORY:TAG [--bundle FILE | --unsigned] [--annotation K=V]...
                 [--plain-http] [--auth-file FILE]   (a Wasm OCI artifact, its bundle as a referrer; prints its component.ref)
  snow-connect artefact attach oci://REGISTRY/REPOSITORY(:TAG|@sha256:HEX) --bundle FILE [--plain-http] [--auth-file FILE]
                 (a bundle of the component's bytes, as a referrer of a component another tool pushed, e.g. wkg oci push)
  snow-connect artefact pull oci://REGISTRY/REPOSITORY(:TAG|@sha256:HEX) [--out FILE] [--trusted-keys PUB[,PUB]] [--plain-http] [--auth-file FILE]
  snow-connect migrate confluent <file|dir>... [--out DIR] [--bootstrap HOST:PORT] [--source-component WASM] [--sink-component WASM]
                 [--trusted-keys PUB] [--schema-registry URL] [--apply http://worker:8083 [--offsets FILE] [--force] [--accept-manual]]
    (translates Confluent's ServiceNow connectors and the open one; exit 0 clean, 1 REVIEW, 2 MANUAL, 3 not applied, 4 invalid input;
     --apply reads HTTP Basic credentials from SNOW_CONNECT_REST_USER_INFO=user:password)
  snow-connect migrate cutover <our connector file> (--old-connector NAME --old-offsets-topic TOPIC | --old-offsets-file FILE
                 | --since 'YYYY-MM-DD HH:MM:SS') [--old-partition TEXT] [--table T] [--old-topic TOPIC] [KAFKA] [--seed-max N] [--clock-margin-seconds N] [--out OFFSETS.json] [--force] [--json]
    (writes our starting position into the connector's offset store, or with --out the KIP-875 body --apply --offsets reads;
     prints the duplicate bound; KAFKA defaults to the connector's own cluster)
  snow-connect migrate verify <our connector file> --from 'YYYY-MM-DD HH:MM:SS' [--until TS] [KAFKA] [--json]
    (the instance's current rows in the window against the topic: missing versions (exit 1) and duplicates by who wrote them)
  snow-connect task-executor --plugin-dir DIR          (the Kafka Connect plugin's child process: framed requests on stdin, docs/kafka-connect.md)
  snow-connect version | --version                     (the version, the commit it was built from, the platform)

Connector files are Java properties or JSON (Kafka Connect style); see docs/configuration.md.
Logs go to stderr, filtered by SNOW_LOG (default info). --status-listen serves GET /status
(every unit's state, JSON) and GET /metrics (Prometheus text) there. Compiled components are kept
in --component-cache (default $SNOW_COMPONENT_CACHE, else ~/.cache/snow-connect/components).
Bundles are Sigstore bundles (cosign sign-blob --bundle), by default <component>.sigstore.json.";
