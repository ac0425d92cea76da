//! Conversions of the keys that say how the instance is reached: a forward proxy
//! (`proxy.url`, the open connector's `snow.http.proxy.url`) and the key and trust stores for TLS
//! (`servicenow.ssl.*`, the open connector's `snow.tls.*`). Java's JKS stores cannot be read by
//! the host: a JKS store becomes the PKCS#12 store `keytool` converts it to, for review, with the
//! command.

use std::path::Path;

use super::super::rules::{Context, Converted};
use super::one;

/// `proxy.url` / `snow.http.proxy.url`: `host:port` or `http://host:port`.
pub fn proxy_url(_: &Context<'_>, value: &str) -> Converted {
    let url = value.trim();
    match snow_runtime::transport::proxy::Proxy::new(url, None, "") {
        Ok(proxy) => Converted::Keys(one("snow.proxy.url", proxy.url())),
        Err((_, why)) => Converted::Manual(format!("{url:?}: {why}; set snow.proxy.url to the proxy's http://host:port")),
    }
}

/// Which store a key names.
#[derive(Clone, Copy)]
enum Store {
    Key,
    Trust,
}

impl Store {
    fn ours(self) -> &'static str {
        match self {
            Store::Key => "snow.instance.ssl.keystore",
            Store::Trust => "snow.instance.ssl.truststore",
        }
    }
}

/// `servicenow.ssl.keystore.path`: the client certificate's store (its type by its name).
pub fn keystore_path(_: &Context<'_>, value: &str) -> Converted {
    store(value, None, Store::Key)
}

/// `servicenow.ssl.truststore.path`: the trusted certificates' store (its type by its name).
pub fn truststore_path(_: &Context<'_>, value: &str) -> Converted {
    store(value, None, Store::Trust)
}

/// The open connector's `snow.tls.keystore.path`, with `snow.tls.keystore.type` (JKS by default).
pub fn open_keystore_path(ctx: &Context<'_>, value: &str) -> Converted {
    store(value, Some(ctx.entries.get("snow.tls.keystore.type").map_or("JKS", |t| t.trim())), Store::Key)
}

/// The open connector's `snow.tls.truststore.path`, with `snow.tls.truststore.type` (JKS by default).
pub fn open_truststore_path(ctx: &Context<'_>, value: &str) -> Converted {
    store(value, Some(ctx.entries.get("snow.tls.truststore.type").map_or("JKS", |t| t.trim())), Store::Trust)
}

/// A store at `path` of `kind` (or, when the product names none, of the type its file name says).
fn store(path: &str, kind: Option<&str>, which: Store) -> Converted {
    let path = path.trim();
    let extension = Path::new(path).extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    let kind = kind.map(str::to_ascii_uppercase).unwrap_or_else(|| match extension.as_str() {
        "p12" | "pfx" => "PKCS12".into(),
        "pem" | "crt" | "cer" => "PEM".into(),
        "jks" => "JKS".into(),
        _ => String::new(),
    });
    let ours = which.ours();
    let keys =
        |location: &str, kind: &str| vec![(format!("{ours}.location"), location.to_string()), (format!("{ours}.type"), kind.to_string())];
    match kind.as_str() {
        "PKCS12" | "PEM" => Converted::Keys(keys(path, &kind)),
        "JKS" | "JCEKS" => {
            let converted = Path::new(path).with_extension("p12").display().to_string();
            Converted::Review(
                keys(&converted, "PKCS12"),
                format!(
                    "a {kind} store cannot be read here: convert it once on each worker with keytool -importkeystore -srckeystore {path} \
                     -srcstoretype {kind} -destkeystore {converted} -deststoretype PKCS12 (keep its password; a key's password must be the store's)"
                ),
            )
        }
        "" => Converted::Review(
            vec![(format!("{ours}.location"), path.to_string())],
            "the store's type is read from its contents (PKCS#12 or PEM); a JKS store is refused at start with the keytool command \
             that converts it"
                .into(),
        ),
        other => Converted::Manual(format!("a {other} store cannot be read here: give it as PKCS#12 or PEM ({ours}.location)")),
    }
}

/// The open connector's `snow.tls.*.type`: taken with the store's path.
pub fn store_type(_: &Context<'_>, value: &str) -> Converted {
    Converted::NotNeeded(format!("{}: taken with the store's path", value.trim()))
}

/// Confluent Cloud V2's uploaded key store (`servicenow.ssl.keystorefile`): the upload's contents
/// are Confluent Cloud's; ours reads a file each worker holds.
pub fn uploaded_keystore(ctx: &Context<'_>, _: &str) -> Converted {
    uploaded(ctx, Store::Key)
}

/// Confluent Cloud V2's uploaded trust store (`servicenow.ssl.truststorefile`).
pub fn uploaded_truststore(ctx: &Context<'_>, _: &str) -> Converted {
    uploaded(ctx, Store::Trust)
}

fn uploaded(ctx: &Context<'_>, which: Store) -> Converted {
    let ours = which.ours();
    let file = format!("/etc/snow-connect/{}-{}.p12", ctx.name, if matches!(which, Store::Key) { "keystore" } else { "truststore" });
    Converted::Review(
        vec![(format!("{ours}.location"), file.clone()), (format!("{ours}.type"), "PKCS12".into())],
        format!(
            "the store was uploaded to Confluent Cloud; save the same store on each worker as {file} (a JKS store converted with \
             keytool -importkeystore … -deststoretype PKCS12)"
        ),
    )
}

/// V2's `servicenow.ssl.enabled`: the stores are used when they are set.
pub fn ssl_enabled(_: &Context<'_>, value: &str) -> Converted {
    Converted::NotNeeded(format!(
        "{}: an https:// instance always uses TLS, and the key and trust stores below when they are set",
        value.trim()
    ))
}

/// V2's `servicenow.ssl.protocol`.
pub fn ssl_protocol(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_uppercase().as_str() {
        "TLSV1.2" | "TLSV1.3" | "TLS" => Converted::NotNeeded(format!("{}: TLS 1.3 or 1.2 is negotiated, never older", value.trim())),
        other => Converted::Manual(format!("{other}: only TLS 1.2 and 1.3 are spoken here")),
    }
}
