//! Reaching ServiceNow the way enterprises do: through an authenticating forward proxy (the tests'
//! own, [`support::forward_proxy`]), to an instance served over HTTPS from a private CA that
//! requires a client certificate ([`support::tls_proxy`] before the fake). The instance's host
//! name, `instance.snow.test`, is resolved by the proxy alone: a request that went around the
//! proxy could not reach anything, so every row that arrives came through it.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use fake_snow::FakeSnow;
use support::forward_proxy::ForwardProxy;
use support::kafka::read_until;
use support::{Runner, connector_file, entries, now_secs, tail, unique, work_dir};

const INSTANCE_HOST: &str = "instance.snow.test";
const USER: &str = "proxied-user";
const PASSWORD: &str = "Proxied-Pw-41c7";
const CLIENT: &str = "proxied-client";
const CLIENT_SECRET: &str = "Proxied-Secret-0b9d";
const PROXY_USER: &str = "egress";
const PROXY_PASSWORD: &str = "Egress-Pw-5e21";
const STORE_PASSWORD: &str = "Store-Pw-73aa";

/// The fake's port (its URL is `http://127.0.0.1:<port>`).
fn port_of(fake: &FakeSnow) -> u16 {
    fake.url().rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse().ok()).unwrap()
}

/// The client's key and certificate of `pki` as a PKCS#12 store (as Confluent's keystores are).
fn client_pkcs12(pki: &Path) -> String {
    let out = std::process::Command::new("openssl")
        .args(["pkcs12", "-export", "-in", "client.pem", "-inkey", "client.pkcs8.key", "-out", "client.p12", "-name", "client"])
        .arg("-passout")
        .arg(format!("pass:{STORE_PASSWORD}"))
        .current_dir(pki)
        .output()
        .unwrap();
    assert!(out.status.success(), "openssl pkcs12: {}", String::from_utf8_lossy(&out.stderr));
    pki.join("client.p12").display().to_string()
}

fn source(
    name: &str,
    topic: &str,
    instance_url: &str,
    proxy: &ForwardProxy,
    extra: &[(&str, &str)],
) -> std::collections::BTreeMap<String, String> {
    let mut config = entries(&[
        ("name", name),
        ("component.path", support::signed(guest_artifacts::GUEST_SOURCE)),
        support::TRUSTED_KEYS,
        ("kafka.bootstrap.servers", kafka_harness::shared().bootstrap()),
        ("offset.storage.file.filename", "offsets.json"),
        ("snow.instance.url", instance_url),
        ("snow.proxy.url", &proxy.url()),
        ("snow.proxy.username", PROXY_USER),
        ("snow.proxy.password", "${env:E2E_PROXY_PASSWORD}"),
        ("snow.tables", "incident"),
        ("snow.table.incident.topic", topic),
        ("snow.batch.size", "10"),
        ("snow.poll.interval.ms", "200"),
        ("snow.safety.lag.seconds", "2"),
        ("snow.retry.backoff.initial.ms", "50"),
        ("snow.retry.backoff.max.ms", "200"),
    ]);
    config.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    config
}

fn start(dir: &Path, label: &str, file: &Path, proxy_password: &str) -> Runner {
    let env = [("E2E_PROXY_PASSWORD", proxy_password), ("E2E_PASSWORD", PASSWORD), ("E2E_CLIENT_SECRET", CLIENT_SECRET)];
    Runner::spawn(dir, label, &[file], support::DEFAULT_LOG, &env)
}

fn keys(records: &[support::kafka::Read]) -> BTreeSet<String> {
    records.iter().map(|r| r.key.clone()).collect()
}

#[test]
fn a_source_reaches_a_private_https_instance_and_its_token_endpoint_only_through_an_authenticating_proxy() {
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    fake.add_oauth_client(CLIENT, CLIENT_SECRET, Some(1800));
    let ids: BTreeSet<String> = fake.shared().seed("incident", 30, now - 3600, 1800).into_iter().collect();
    let pki = work_dir("enterprise-pki");
    kafka_harness::secure::make_certificates(&pki).unwrap();
    let keystore = client_pkcs12(&pki);
    let ca = pki.join("ca.pem").display().to_string();
    let front = support::tls_proxy::TlsProxy::start(&pki, port_of(&fake), true);
    let instance = format!("{INSTANCE_HOST}:{}", front.port);
    let proxy = ForwardProxy::start(PROXY_USER, PROXY_PASSWORD, &[(INSTANCE_HOST, "127.0.0.1")]);
    let oauth = [
        ("snow.auth.type", "oauth_password"),
        ("snow.auth.client.id", CLIENT),
        ("snow.auth.client.secret", "${env:E2E_CLIENT_SECRET}"),
        ("snow.auth.username", USER),
        ("snow.auth.password", "${env:E2E_PASSWORD}"),
        ("snow.instance.ssl.truststore.location", &ca),
    ];
    let url = format!("https://{instance}");

    // A wrong proxy password: one clear error naming the proxy, and nothing reached the instance.
    let (name, topic) = (unique("proxied"), unique("proxied"));
    let dir = work_dir("proxy-refused");
    let wrong = "Wrong-Proxy-Pw-1";
    let runner = start(&dir, "run", &connector_file(&dir, &name, &source(&name, &topic, &url, &proxy, &oauth)), wrong);
    let refused = format!(
        "the proxy {} refused the credentials (407 Proxy Authentication Required): check snow.proxy.username and snow.proxy.password",
        proxy.url()
    );
    let mut runner = runner;
    runner.wait_for_log(&refused, Duration::from_secs(120));
    let log = runner.stop();
    let asked = proxy.asked();
    assert!(!asked.is_empty() && asked.iter().all(|a| !a.authorized && a.target == instance), "{asked:?}");
    assert_eq!((front.accepted(), front.refused(), fake.journal().entries.len()), (0, 0, 0), "nothing went past the proxy");
    assert!(!log.contains(wrong) && !log.contains(PROXY_PASSWORD), "no proxy password in the log");

    // The right proxy password and the private CA trusted, but no client certificate: the
    // instance refuses the handshake, and the error says what to set.
    let (name, topic) = (unique("proxied"), unique("proxied"));
    let dir = work_dir("proxy-no-client-certificate");
    let mut runner = start(&dir, "run", &connector_file(&dir, &name, &source(&name, &topic, &url, &proxy, &oauth)), PROXY_PASSWORD);
    runner.wait_for_log("the server requires a client certificate: set snow.instance.ssl.keystore.location", Duration::from_secs(120));
    runner.stop();
    assert!(front.refused() >= 1 && front.accepted() == 0, "refused by TLS: {} refused, {} accepted", front.refused(), front.accepted());
    assert!(fake.journal().entries.is_empty(), "the instance served nothing without the certificate");

    // With the client certificate from a PKCS#12 key store: every row, its token asked for and
    // its pages read through the proxy's tunnels to the instance alone.
    let (name, topic) = (unique("proxied"), unique("proxied"));
    let dir = work_dir("proxy-mtls");
    let before = proxy.asked().len();
    let mut with_certificate = oauth.to_vec();
    with_certificate.extend([
        ("snow.instance.ssl.keystore.type", "PKCS12"),
        ("snow.instance.ssl.keystore.location", keystore.as_str()),
        ("snow.instance.ssl.keystore.password", "${env:E2E_STORE_PASSWORD}"),
    ]);
    let file = connector_file(&dir, &name, &source(&name, &topic, &url, &proxy, &with_certificate));
    let env = [
        ("E2E_PROXY_PASSWORD", PROXY_PASSWORD),
        ("E2E_PASSWORD", PASSWORD),
        ("E2E_CLIENT_SECRET", CLIENT_SECRET),
        ("E2E_STORE_PASSWORD", STORE_PASSWORD),
    ];
    let runner = Runner::spawn(&dir, "run", &[&file], support::DEFAULT_LOG, &env);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| keys(r).len() >= ids.len());
    let log = runner.stop();
    assert_eq!(keys(&records), ids, "every row; log:\n{}", tail(&log, 30));
    let journal = fake.journal();
    assert!(journal.entries.iter().any(|e| e.path == "/oauth_token.do" && e.status == 200), "the token came through the proxy");
    assert!(journal.entries.iter().any(|e| e.path.starts_with("/api/now/table/incident") && e.auth == "bearer"));
    let tunnels = &proxy.asked()[before..];
    assert!(!tunnels.is_empty(), "the proxy opened the tunnels");
    assert!(tunnels.iter().all(|a| a.method == "CONNECT" && a.target == instance && a.authorized), "only the instance: {tunnels:?}");
    for secret in [PROXY_PASSWORD, STORE_PASSWORD, CLIENT_SECRET, PASSWORD] {
        assert!(!log.contains(secret), "a secret in the log");
    }
}

#[test]
fn a_plain_http_instance_is_asked_through_the_proxy_in_absolute_form_and_the_no_proxy_list_goes_direct() {
    let now = now_secs();
    let fake = support::fake_with_user(USER, PASSWORD, Some(now));
    let ids: BTreeSet<String> = fake.shared().seed("incident", 25, now - 3600, 1800).into_iter().collect();
    let proxy = ForwardProxy::start(PROXY_USER, PROXY_PASSWORD, &[(INSTANCE_HOST, "127.0.0.1")]);
    let instance = format!("{INSTANCE_HOST}:{}", port_of(&fake));
    let basic = [("snow.auth.username", USER), ("snow.auth.password", "${env:E2E_PASSWORD}")];

    let (name, topic) = (unique("absolute"), unique("absolute"));
    let dir = work_dir("proxy-absolute");
    let file = connector_file(&dir, &name, &source(&name, &topic, &format!("http://{instance}"), &proxy, &basic));
    let runner = start(&dir, "run", &file, PROXY_PASSWORD);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| keys(r).len() >= ids.len());
    let log = runner.stop();
    assert_eq!(keys(&records), ids, "every row; log:\n{}", tail(&log, 30));
    let asked = proxy.asked();
    assert!(asked.iter().any(|a| a.method == "GET"), "{asked:?}");
    assert!(asked.iter().all(|a| a.target == instance && a.authorized), "only the instance, always with the credentials: {asked:?}");
    let served = fake.journal().entries.len();
    assert!(
        asked.len() >= served && served > 0,
        "every request the instance served came through the proxy ({} asked, {served} served)",
        asked.len()
    );

    // The instance on the no-proxy list: reached directly (its name here is one the system
    // resolves), and the proxy is asked nothing.
    let (name, topic) = (unique("direct"), unique("direct"));
    let dir = work_dir("proxy-bypassed");
    let before = proxy.asked().len();
    let mut direct = basic.to_vec();
    direct.push(("snow.proxy.no.proxy", "localhost, 127.0.0.1"));
    let url = fake.url();
    let file = connector_file(&dir, &name, &source(&name, &topic, &url, &proxy, &direct));
    let runner = start(&dir, "run", &file, PROXY_PASSWORD);
    let records = read_until(kafka_harness::shared().bootstrap(), &topic, Duration::from_secs(120), |r| keys(r).len() >= ids.len());
    let log = runner.stop();
    assert_eq!(keys(&records), ids, "every row; log:\n{}", tail(&log, 30));
    assert_eq!(proxy.asked().len(), before, "a host on the no-proxy list is reached directly");
}
