//! Kafka security end to end: a broker with a `SASL_SSL` listener (certificates made by the
//! test with openssl, SCRAM users made by Kafka's storage tool, PLAIN users, OAUTHBEARER tokens
//! of an OIDC identity provider that the broker validates against its JWKS, ACLs added by Kafka's
//! AclCommand, re-authentication every 10 s), and the real binary reaching it — a source and a
//! sink of a standalone run (the connector file's `kafka.*` security keys, SCRAM-SHA-512 and
//! PLAIN), a source with OIDC client credentials whose tokens expire while it runs, a three-worker
//! fleet (a Connect user's worker.properties as written: `sasl.jaas.config` with SCRAM and with
//! OAUTHBEARER, a PEM trust store) — and the clear errors a wrong password, a wrong client secret,
//! a token for another audience or a principal without ACLs gets. The broker's `SSL` listener
//! (mutual TLS: a client certificate required) and `SASL_PLAINTEXT` listener serve a source with
//! a PKCS#12 key store and a sink with SCRAM. What the tests read back goes through the harness's
//! own listener; what is tested goes through the secured listeners only.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Duration;

use fake_snow::FakeSnow;
use kafka_harness::secure::{Oidc, Request, SecureBroker};
use serde_json::json;
use support::fleet::{curl, tasks_in, wait_status, worker_properties};
use support::idp::{self, Idp};
use support::kafka::read_until;
use support::{Runner, now_secs, unique, work_dir};

const USER: &str = "snow-secure";
const PASSWORD: &str = "secure-Snow-Pw-55";
const CONNECT_PASSWORD: &str = "Connect-Scram-Pw-81";
const PLAIN_PASSWORD: &str = "Plain-Kafka-Pw-62";
/// `notxn` (SCRAM) may use topics, groups and the cluster, but no transactional id.
const NOTXN_PASSWORD: &str = "NoTxn-Scram-Pw-44";
const OIDC_CLIENT: &str = "snow-connect-oidc";
const OIDC_SECRET: &str = "Oidc-Client-Secret-93";
const FLEET_OIDC_CLIENT: &str = "snow-fleet-oidc";
/// Tokens this short expire (and the broker re-authenticates every 10 s) while a test runs.
const TOKEN_LIFETIME: Duration = Duration::from_secs(15);

/// The identity provider of this test binary: `snow-connect-oidc` and `snow-fleet-oidc` get
/// tokens for the broker (principal `User:oidc-connect`); `elsewhere` gets tokens meant for
/// another audience.
fn idp() -> &'static Idp {
    static IDP: OnceLock<Idp> = OnceLock::new();
    IDP.get_or_init(|| {
        let client = |id: &str, secret: &str, audience: Option<&str>| idp::Client {
            id: id.into(),
            secret: secret.into(),
            subject: "oidc-connect".into(),
            audience: audience.map(str::to_string),
        };
        Idp::start(
            &[
                client(OIDC_CLIENT, OIDC_SECRET, None),
                client(FLEET_OIDC_CLIENT, OIDC_SECRET, None),
                client("elsewhere", "Elsewhere-Secret-4", Some("another-service")),
            ],
            TOKEN_LIFETIME,
            "snow-kafka",
        )
    })
}

/// The secured broker of this test binary: `connect` (SCRAM), `plainuser` (PLAIN) and the OIDC
/// principal `oidc-connect` may do anything; `stranger` (SCRAM) has no ACL at all.
fn broker() -> &'static SecureBroker {
    static BROKER: OnceLock<SecureBroker> = OnceLock::new();
    BROKER.get_or_init(|| {
        let broker = SecureBroker::start(&Request {
            scram_users: vec![
                ("connect".into(), CONNECT_PASSWORD.into()),
                ("stranger".into(), "Stranger-Pw-12".into()),
                ("notxn".into(), NOTXN_PASSWORD.into()),
            ],
            plain_users: vec![("plainuser".into(), PLAIN_PASSWORD.into())],
            oidc: Some(Oidc { jwks_url: idp().jwks_url(), issuer: idp().issuer(), audience: idp().audience.clone() }),
        })
        .unwrap();
        broker
            .acl(&[
                "--allow-principal",
                "User:connect",
                "--allow-principal",
                "User:plainuser",
                "--allow-principal",
                "User:oidc-connect",
                // The client certificate's subject: the principal of the SSL listener's clients.
                "--allow-principal",
                "User:CN=snow-test-client",
                "--operation",
                "All",
                "--topic",
                "*",
                "--group",
                "*",
                "--transactional-id",
                "*",
                "--cluster",
            ])
            .unwrap();
        broker.acl(&["--allow-principal", "User:notxn", "--operation", "All", "--topic", "*", "--group", "*", "--cluster"]).unwrap();
        broker
    })
}

fn fake(now: i64) -> FakeSnow {
    support::fake_with_user(USER, PASSWORD, Some(now))
}

/// A connector file's security keys: `mechanism` as `user`, the password by reference.
fn connector_security(mechanism: &str, user: &str, password_env: &str) -> Vec<(String, String)> {
    [
        ("kafka.bootstrap.servers", broker().bootstrap().to_string()),
        ("kafka.security.protocol", "SASL_SSL".to_string()),
        ("kafka.sasl.mechanism", mechanism.to_string()),
        ("kafka.sasl.username", user.to_string()),
        ("kafka.sasl.password", format!("${{env:{password_env}}}")),
        ("kafka.ssl.ca.location", broker().ca_file().display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A connector file's security keys for OAUTHBEARER with OIDC client credentials (librdkafka's
/// own keys), the secret by reference.
fn oidc_security(client: &str, secret_env: &str) -> Vec<(String, String)> {
    [
        ("kafka.bootstrap.servers", broker().bootstrap().to_string()),
        ("kafka.security.protocol", "SASL_SSL".to_string()),
        ("kafka.sasl.mechanism", "OAUTHBEARER".to_string()),
        ("kafka.sasl.oauthbearer.method", "oidc".to_string()),
        ("kafka.sasl.oauthbearer.client.id", client.to_string()),
        ("kafka.sasl.oauthbearer.client.secret", format!("${{env:{secret_env}}}")),
        ("kafka.sasl.oauthbearer.token.endpoint.url", idp().token_url()),
        ("kafka.sasl.oauthbearer.scope", "kafka".to_string()),
        ("kafka.ssl.ca.location", broker().ca_file().display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[test]
fn a_source_with_oidc_client_credentials_keeps_producing_as_its_tokens_expire() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 200, now - 3600, 3000);
    let dir = work_dir("secure-oidc");
    let (name, topic) = (unique("osrc"), unique("osrc-rows"));
    let mut source = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD), ("snow.safety.lag.seconds", "2")],
    );
    source.extend(oidc_security(OIDC_CLIENT, "KAFKA_OIDC_SECRET"));
    let file = support::connector_file(&dir, &name, &source);
    let runner = Runner::spawn(&dir, "oidc", &[&file], support::DEFAULT_LOG, &[("KAFKA_OIDC_SECRET", OIDC_SECRET)]);
    let key_count = |r: &[support::kafka::Read]| r.iter().map(|x| &x.key).collect::<BTreeSet<_>>().len();
    let records = read_until(broker().admin_bootstrap(), &topic, Duration::from_secs(120), |r| key_count(r) >= ids.len());
    assert_eq!(key_count(&records), ids.len(), "every row over SASL_SSL with an OIDC token");
    let first = *idp().issued(OIDC_CLIENT).first().expect("the client asked the identity provider for a token");

    // The first token expires; the clients fetch new ones (and the broker, re-authenticating every
    // 10 s, accepts them): rows changed after that still arrive.
    support::wait_until("a token issued after the first one expired", Duration::from_secs(120), || {
        idp().issued(OIDC_CLIENT).last().is_some_and(|t| *t > first + TOKEN_LIFETIME).then_some(())
    });
    fake.clock().advance(1);
    let mut changes = serde_json::Map::new();
    changes.insert("state".into(), serde_json::Value::String("7".into()));
    fake.shared().update_rows("incident", &ids[..50], &changes);
    fake.clock().advance(5);
    let changed = |r: &support::kafka::Read| r.headers.get("snow.sys_mod_count").is_some_and(|v| v == "1");
    let records =
        read_until(broker().admin_bootstrap(), &topic, Duration::from_secs(120), |r| r.iter().filter(|x| changed(x)).count() >= 50);
    assert_eq!(records.iter().filter(|x| changed(x)).count(), 50, "the rows changed after the first token expired arrive");
    let log = runner.stop();
    assert!(!log.contains(OIDC_SECRET), "the client secret never reaches the log");
    assert!(idp().issued(OIDC_CLIENT).len() >= 2, "tokens were renewed: {:?}", idp().issued(OIDC_CLIENT));
}

#[test]
fn a_source_and_a_sink_run_over_sasl_ssl() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 300, now - 3600, 3000);
    let dir = work_dir("secure-standalone");
    let (name, topic) = (unique("ssrc"), unique("ssrc-rows"));
    let mut source = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD)],
    );
    source.extend(connector_security("SCRAM-SHA-512", "connect", "KAFKA_CONNECT_PASSWORD"));
    let file = support::connector_file(&dir, &name, &source);
    let env = [("KAFKA_CONNECT_PASSWORD", CONNECT_PASSWORD), ("KAFKA_PLAIN_PASSWORD", PLAIN_PASSWORD)];
    let runner = Runner::spawn(&dir, "source", &[&file], support::DEFAULT_LOG, &env);
    let records = read_until(broker().admin_bootstrap(), &topic, Duration::from_secs(120), |r| {
        r.iter().map(|x| &x.key).collect::<BTreeSet<_>>().len() >= ids.len()
    });
    assert_eq!(records.iter().map(|r| r.key.as_str()).collect::<BTreeSet<_>>().len(), ids.len(), "every row over SASL_SSL");
    let log = runner.stop();
    assert!(!log.contains(CONNECT_PASSWORD), "the Kafka password never reaches the log");

    // A sink reading with PLAIN: updates produced to its topic land in the fake.
    let (sink, updates_topic) = (unique("ssink"), unique("ssink-updates"));
    support::kafka::create_topic_blocking(broker().admin_bootstrap(), &updates_topic, 2);
    let updates = support::keyed_updates(&ids, 400, 7);
    support::kafka::produce_blocking(broker().admin_bootstrap(), &updates_topic, &updates);
    let mut config = support::sink_entries(
        &fake.url(),
        &sink,
        &updates_topic,
        "incident",
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD), ("reporter.result.topic.name", "${connector}-ok")],
    );
    config.extend(connector_security("PLAIN", "plainuser", "KAFKA_PLAIN_PASSWORD"));
    let file = support::connector_file(&dir, &sink, &config);
    let runner = Runner::spawn(&dir, "sink", &[&file], support::DEFAULT_LOG, &env);
    let reports = read_until(broker().admin_bootstrap(), &format!("{sink}-ok"), Duration::from_secs(120), |r| r.len() >= updates.len());
    assert!(reports.len() >= updates.len(), "every record reported over SASL_SSL");
    support::wait_until("the sink's offsets committed over SASL_SSL", Duration::from_secs(60), || {
        let committed = support::kafka::committed(broker().admin_bootstrap(), &format!("connect-{sink}"), &updates_topic, 2);
        (committed.iter().sum::<i64>() >= updates.len() as i64).then_some(())
    });
    let log = runner.stop();
    support::assert_last_updates(&fake, "incident", &updates);
    assert!(!log.contains(PLAIN_PASSWORD), "the Kafka password never reaches the log");
}

/// The test CA's client key and certificate as a PKCS#12 key store protected by `password`, in `dir`.
fn client_keystore(dir: &std::path::Path, password: &str) -> String {
    let certificates = broker().certificates_dir();
    let store = dir.join("kafka-client.p12");
    let out = std::process::Command::new("openssl")
        .args(["pkcs12", "-export", "-name", "client", "-in"])
        .arg(certificates.join("client.pem"))
        .arg("-inkey")
        .arg(certificates.join("client.pkcs8.key"))
        .arg("-out")
        .arg(&store)
        .arg("-passout")
        .arg(format!("pass:{password}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "openssl pkcs12: {}", String::from_utf8_lossy(&out.stderr));
    store.display().to_string()
}

#[test]
fn a_source_runs_over_mutual_tls_and_a_sink_over_sasl_plaintext() {
    const STORE_PASSWORD: &str = "Kafka-Store-Pw-38";
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 200, now - 3600, 3000);
    let dir = work_dir("secure-mtls");
    let keystore = client_keystore(&dir, STORE_PASSWORD);

    // SSL with a client certificate, as a Connect user's worker writes it: Kafka's own key names,
    // a PKCS#12 key store and a PEM trust store.
    let (name, topic) = (unique("mtls"), unique("mtls-rows"));
    let mut source = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD)],
    );
    source.extend(entries_of(&[
        ("kafka.bootstrap.servers", broker().ssl_bootstrap()),
        ("kafka.security.protocol", "SSL"),
        ("kafka.ssl.truststore.type", "PEM"),
        ("kafka.ssl.truststore.location", &broker().ca_file().display().to_string()),
        ("kafka.ssl.keystore.type", "PKCS12"),
        ("kafka.ssl.keystore.location", &keystore),
        ("kafka.ssl.keystore.password", "${env:KAFKA_STORE_PASSWORD}"),
    ]));
    let file = support::connector_file(&dir, &name, &source);
    let env = [("KAFKA_STORE_PASSWORD", STORE_PASSWORD), ("KAFKA_CONNECT_PASSWORD", CONNECT_PASSWORD)];
    let runner = Runner::spawn(&dir, "source", &[&file], support::DEFAULT_LOG, &env);
    let records = read_until(broker().admin_bootstrap(), &topic, Duration::from_secs(120), |r| {
        r.iter().map(|x| &x.key).collect::<BTreeSet<_>>().len() >= ids.len()
    });
    let log = runner.stop();
    assert_eq!(records.iter().map(|r| r.key.as_str()).collect::<BTreeSet<_>>().len(), ids.len(), "every row over mutual TLS");
    assert!(!log.contains(STORE_PASSWORD), "the store's password never reaches the log");

    // The same source without its certificate: the SSL listener refuses the handshake and the
    // start stops with the cause.
    let mut refused = source.clone();
    for key in ["kafka.ssl.keystore.type", "kafka.ssl.keystore.location", "kafka.ssl.keystore.password"] {
        refused.remove(key);
    }
    let (name, _) = (unique("mtls-none"), ());
    refused.insert("name".into(), name.clone());
    let file = support::connector_file(&dir, &name, &refused);
    let mut runner = Runner::spawn(&dir, "refused", &[&file], support::DEFAULT_LOG, &env);
    let line = runner.wait_for_log("the brokers refused the client certificate", Duration::from_secs(60));
    runner.stop();
    assert!(line.contains(&format!("Kafka at SSL://{}: the brokers refused", broker().ssl_bootstrap())), "{}", support::tail(&line, 10));

    // SASL_PLAINTEXT with SCRAM: updates produced to the sink's topic land in the fake.
    let (sink, updates_topic) = (unique("splain"), unique("splain-updates"));
    support::kafka::create_topic_blocking(broker().admin_bootstrap(), &updates_topic, 2);
    let updates = support::keyed_updates(&ids, 200, 5);
    support::kafka::produce_blocking(broker().admin_bootstrap(), &updates_topic, &updates);
    let mut config = support::sink_entries(
        &fake.url(),
        &sink,
        &updates_topic,
        "incident",
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD), ("reporter.result.topic.name", "${connector}-ok")],
    );
    config.extend(entries_of(&[
        ("kafka.bootstrap.servers", broker().sasl_plaintext_bootstrap()),
        ("kafka.security.protocol", "SASL_PLAINTEXT"),
        ("kafka.sasl.mechanism", "SCRAM-SHA-256"),
        ("kafka.sasl.username", "connect"),
        ("kafka.sasl.password", "${env:KAFKA_CONNECT_PASSWORD}"),
    ]));
    let file = support::connector_file(&dir, &sink, &config);
    let runner = Runner::spawn(&dir, "sink", &[&file], support::DEFAULT_LOG, &env);
    let reports = read_until(broker().admin_bootstrap(), &format!("{sink}-ok"), Duration::from_secs(120), |r| r.len() >= updates.len());
    assert!(reports.len() >= updates.len(), "every record reported over SASL_PLAINTEXT");
    let log = runner.stop();
    support::assert_last_updates(&fake, "incident", &updates);
    assert!(!log.contains(CONNECT_PASSWORD), "the Kafka password never reaches the log");
}

fn entries_of(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn a_three_worker_fleet_runs_over_sasl_ssl_with_a_connect_workers_keys() {
    let now = now_secs();
    let fake = fake(now);
    let tables: Vec<String> = (0..6).map(|i| format!("u_secure_{i}")).collect();
    let mut ids = Vec::new();
    for table in &tables {
        ids.extend(fake.shared().seed(table, 100, now - 3600, 3000));
    }
    let dir = work_dir("secure-fleet");
    let group = unique("secure-fleet");
    let ca = broker().ca_file().display().to_string();
    let jaas =
        format!("org.apache.kafka.common.security.scram.ScramLoginModule required username=\"connect\" password=\"{CONNECT_PASSWORD}\";");
    let security: Vec<(&str, &str)> = vec![
        ("bootstrap.servers", broker().bootstrap()),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("sasl.jaas.config", &jaas),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", &ca),
        // As a Connect worker file repeats them for its clients.
        ("producer.security.protocol", "SASL_SSL"),
        ("consumer.security.protocol", "SASL_SSL"),
    ];
    // The third worker logs in with OAUTHBEARER, as a Connect worker file writes it.
    let token_url = idp().token_url();
    let oidc_jaas = format!(
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"{FLEET_OIDC_CLIENT}\" clientSecret=\"{OIDC_SECRET}\" scope=\"kafka\";"
    );
    let oidc: Vec<(&str, &str)> = security
        .iter()
        .map(|&(k, v)| match k {
            "sasl.mechanism" => (k, "OAUTHBEARER"),
            "sasl.jaas.config" => (k, oidc_jaas.as_str()),
            _ => (k, v),
        })
        .chain([
            ("sasl.login.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"),
            ("sasl.oauthbearer.token.endpoint.url", token_url.as_str()),
        ])
        .collect();
    let specs: Vec<_> =
        (1..=3).map(|i| worker_properties(&dir, &format!("w{i}"), &group, if i == 3 { &oidc } else { &security })).collect();
    let env = [("SNOW_SECURE_PASSWORD", PASSWORD)];
    let workers: Vec<Runner> =
        specs.iter().enumerate().map(|(i, s)| support::fleet::start_worker(&dir, &format!("w{}", i + 1), s, &env)).collect();
    let (name, topic) = (unique("sfleet"), unique("sfleet-rows"));
    let table_refs: Vec<&str> = tables.iter().map(String::as_str).collect();
    let mut config: BTreeMap<String, String> = support::source_entries(
        &fake.url(),
        &name,
        &topic,
        &table_refs,
        &[("snow.auth.username", USER), ("snow.auth.password", "${env:SNOW_SECURE_PASSWORD}")],
    );
    for k in ["name", "offset.storage.file.filename", "kafka.bootstrap.servers", "component.trusted.keys"] {
        config.remove(k);
    }
    let created = curl(specs[0].port, "POST", "/connectors", Some(&json!({ "name": name, "config": config })));
    assert_eq!(created.status, 201, "{}", created.text);
    let status = wait_status(specs[2].port, &name, Duration::from_secs(120), "6 tasks running", |s| tasks_in(s, "RUNNING") == 6);
    let workers_used: BTreeSet<&str> = status["tasks"].as_array().unwrap().iter().filter_map(|t| t["worker_id"].as_str()).collect();
    assert!(workers_used.len() >= 2, "the tables are shared between workers: {status}");
    let records = read_until(broker().admin_bootstrap(), &topic, Duration::from_secs(120), |r| {
        r.iter().map(|x| &x.key).collect::<BTreeSet<_>>().len() >= ids.len()
    });
    assert_eq!(records.iter().map(|r| r.key.as_str()).collect::<BTreeSet<_>>().len(), ids.len());
    assert!(!idp().issued(FLEET_OIDC_CLIENT).is_empty(), "the third worker logged in with an OIDC token");

    // The operator tools reach the secured cluster with a worker's own file as --command-config
    // (SCRAM for the offsets, OAUTHBEARER for the count).
    let offsets_topic = format!("{group}-offsets");
    let w1 = specs[0].file.display().to_string();
    support::wait_until("every table's offset listed over SASL_SSL", Duration::from_secs(60), || {
        let (ok, out, err) =
            support::snow_connect(&dir, &["offsets", "list", "--topic", &offsets_topic, "--command-config", &w1, "--connector", &name]);
        assert!(ok, "offsets list over SASL_SSL: {err}");
        tables.iter().all(|t| out.contains(&format!("{t:?}"))).then_some(())
    });
    let w3 = specs[2].file.display().to_string();
    let (ok, out, err) = support::snow_connect(&dir, &["topic", "count", "--topic", &topic, "--command-config", &w3]);
    assert!(ok, "topic count with OIDC: {err}");
    let count: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(count["distinct_keys"], ids.len(), "{out}");
    for worker in workers {
        let log = worker.stop();
        assert!(!log.contains(CONNECT_PASSWORD) && !log.contains(OIDC_SECRET), "the worker's Kafka secrets never reach its log");
    }
}

#[test]
fn a_wrong_password_or_a_principal_without_acls_gets_a_clear_error() {
    let now = now_secs();
    let fake = fake(now);
    let dir = work_dir("secure-refused");
    // A standalone source with a wrong password: the start stops, naming the listener and cause.
    let mut source = support::source_entries(
        &fake.url(),
        "wrongpw",
        "t",
        &["incident"],
        &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD)],
    );
    source.extend(connector_security("SCRAM-SHA-512", "connect", "KAFKA_WRONG"));
    let file = support::connector_file(&dir, "wrongpw", &source);
    let mut runner = Runner::spawn(&dir, "wrongpw", &[&file], support::DEFAULT_LOG, &[("KAFKA_WRONG", "not-the-password")]);
    let line = runner.wait_for_log("refused the credentials", Duration::from_secs(60));
    assert!(line.contains(&format!("SASL_SSL://{} as user \"connect\" (SCRAM-SHA-512)", broker().bootstrap())), "{line}");
    let log = runner.stop();
    assert!(!log.contains("not-the-password"), "the wrong password is not shown either");

    // OIDC: a wrong client secret (the identity provider refuses it), and a token meant for
    // another service (the broker refuses it): each stops the start with its cause.
    let refused_before = idp().refused();
    for (client, secret, cause) in [
        (OIDC_CLIENT, "not-the-secret", "the identity provider refused the client"),
        ("elsewhere", "Elsewhere-Secret-4", "the brokers refused the token"),
    ] {
        let mut source = support::source_entries(
            &fake.url(),
            "wrongoidc",
            "t",
            &["incident"],
            &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD)],
        );
        source.extend(oidc_security(client, "KAFKA_OIDC_SECRET"));
        let file = support::connector_file(&dir, "wrongoidc", &source);
        let mut runner = Runner::spawn(&dir, "wrongoidc", &[&file], support::DEFAULT_LOG, &[("KAFKA_OIDC_SECRET", secret)]);
        let line = runner.wait_for_log(cause, Duration::from_secs(60));
        assert!(line.contains(&format!("SASL_SSL://{} as OIDC client {client:?} (OAUTHBEARER)", broker().bootstrap())), "{line}");
        let log = runner.stop();
        assert!(!log.contains(secret), "the client secret is not shown");
    }
    assert!(idp().refused() > refused_before, "the identity provider refused the wrong secret");
    assert!(!idp().issued("elsewhere").is_empty(), "the broker, not the provider, refused the other audience's token");

    // A worker with a wrong password: the same, and it exits.
    let wrong = worker_properties(
        &dir,
        "wrong",
        &unique("secure-wrong"),
        &[
            ("bootstrap.servers", broker().bootstrap()),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "connect"),
            ("sasl.password", "also-not-it"),
            ("ssl.ca.location", &broker().ca_file().display().to_string()),
        ],
    );
    let mut worker = Runner::command(
        &dir,
        "wrong",
        &[std::ffi::OsStr::new("worker"), std::ffi::OsStr::new("--config"), wrong.file.as_os_str()],
        support::DEFAULT_LOG,
        &[],
    );
    let line = worker.wait_for_log("refused the credentials", Duration::from_secs(60));
    assert!(line.contains(&format!("SASL_SSL://{} as user \"connect\"", broker().bootstrap())), "{line}");
    assert!(!worker.stop().contains("also-not-it"));
    // An operator tool with that file: the same error, at once, not a hang.
    let (ok, _, err) =
        support::snow_connect(&dir, &["topic", "count", "--topic", "t", "--command-config", &wrong.file.display().to_string()]);
    assert!(!ok && err.contains("refused the credentials") && !err.contains("also-not-it"), "{err}");

    // A worker whose principal has no ACL: the state topic it may not create is named.
    let stranger = worker_properties(
        &dir,
        "stranger",
        &unique("secure-stranger"),
        &[
            ("bootstrap.servers", broker().bootstrap()),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "stranger"),
            ("sasl.password", "Stranger-Pw-12"),
            ("ssl.ca.location", &broker().ca_file().display().to_string()),
        ],
    );
    let mut worker = Runner::command(
        &dir,
        "stranger",
        &[std::ffi::OsStr::new("worker"), std::ffi::OsStr::new("--config"), stranger.file.as_os_str()],
        support::DEFAULT_LOG,
        &[],
    );
    let line = worker.wait_for_log("config.storage.topic", Duration::from_secs(90));
    let log = worker.stop();
    assert!(
        log.contains("authorization failed") && log.contains("as user \"stranger\"") && log.contains("docs/security.md"),
        "{line}\n{}",
        support::tail(&log, 20)
    );
}

#[test]
fn a_broker_refusing_transactions_runs_requested_at_least_once_and_parks_required() {
    let now = now_secs();
    let fake = fake(now);
    let ids = fake.shared().seed("incident", 50, now - 3600, 3000);
    let dir = work_dir("secure-notxn");
    let connector = |label: &str, support: &str| {
        let (name, topic) = (unique(label), unique(&format!("{label}-rows")));
        let mut source = support::source_entries(
            &fake.url(),
            &name,
            &topic,
            &["incident"],
            &[("snow.auth.username", USER), ("snow.auth.password", PASSWORD), ("exactly.once.support", support)],
        );
        source.remove("offset.storage.file.filename");
        source.insert("offset.storage.topic".into(), unique(&format!("{label}-offsets")));
        source.extend(connector_security("SCRAM-SHA-512", "notxn", "KAFKA_NOTXN_PASSWORD"));
        (support::connector_file(&dir, &name, &source), topic)
    };
    let env = [("KAFKA_NOTXN_PASSWORD", NOTXN_PASSWORD)];
    // requested: the broker denies the principal transactional ids, so the table runs at least once, saying why.
    let (file, topic) = connector("notxn-requested", "requested");
    let mut runner = Runner::spawn(&dir, "requested", &[&file], support::DEFAULT_LOG, &env);
    let log = runner.wait_for_log("exactly.once.support=requested, but Kafka refuses transactions", Duration::from_secs(120));
    assert!(log.contains("runs at-least-once"), "{}", support::tail(&log, 10));
    let keys = |r: &[support::kafka::Read]| r.iter().map(|x| x.key.clone()).collect::<BTreeSet<_>>().len();
    let records = read_until(broker().admin_bootstrap(), &topic, Duration::from_secs(120), |r| keys(r) >= ids.len());
    assert_eq!(keys(&records), ids.len(), "every row, at least once");
    runner.stop();
    // required: the table is parked naming the refusal; nothing is written at least once instead.
    let (file, _) = connector("notxn-required", "required");
    let mut runner = Runner::spawn(&dir, "required", &[&file], support::DEFAULT_LOG, &env);
    let log = runner.wait_for_log("exactly.once.support=required, but Kafka refuses transactions", Duration::from_secs(120));
    assert!(log.to_lowercase().contains("transactional"), "the denial is named: {}", support::tail(&log, 10));
    runner.stop();
}
