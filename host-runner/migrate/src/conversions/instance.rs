//! Conversions of the instance's keys: its URL, credentials' modes, timeouts and retries.

use super::super::rules::{Context, Converted};
use super::{one, only_default, whole};

/// `servicenow.url`: the instance's base URL, without the trailing slashes Confluent tolerated.
pub fn instance_url(_: &Context<'_>, value: &str) -> Converted {
    let url = value.trim().trim_end_matches('/');
    if !url.starts_with("https://") && !url.starts_with("http://") {
        return Converted::Manual(format!(
            "{url:?} is not an http(s) URL; set snow.instance.url to the instance's https://<name>.service-now.com"
        ));
    }
    Converted::Keys(one("snow.instance.url", url))
}

/// `retry.max.times` / V2's `max.retries`: retries after the first attempt; ours counts attempts.
pub fn retries_to_attempts(_: &Context<'_>, value: &str) -> Converted {
    match whole(value) {
        Ok(n) => Converted::Keys(one("snow.retry.max.attempts", (n + 1).to_string())),
        Err(e) => e,
    }
}

/// `connection.timeout.ms`: our connect timeout, which the host caps at 60 s.
pub fn connect_timeout(_: &Context<'_>, value: &str) -> Converted {
    match whole(value) {
        Ok(ms) if ms > 60_000 => {
            Converted::Review(one("snow.http.connect.timeout.ms", "60000"), format!("{ms} ms is above the host's 60 s cap; 60000 kept"))
        }
        Ok(ms) => Converted::Keys(one("snow.http.connect.timeout.ms", ms.to_string())),
        Err(e) => e,
    }
}

/// `read.timeout.ms` (and a sink's `write.timeout.ms`, the larger of the two): the time to an
/// answer's first byte.
pub fn request_timeout(ctx: &Context<'_>, value: &str) -> Converted {
    let mut ms = match whole(value) {
        Ok(ms) => ms,
        Err(e) => return e,
    };
    if ctx.product.is_sink() {
        for other in ["read.timeout.ms", "write.timeout.ms"] {
            if let Some(v) = ctx.entries.get(other).and_then(|v| v.trim().parse::<u64>().ok()) {
                ms = ms.max(v);
            }
        }
    }
    let keys = one("snow.http.request.timeout.ms", ms.min(120_000).to_string());
    if ms < 60_000 {
        Converted::Review(
            keys,
            format!(
                "{ms} ms to the first byte: ServiceNow may take up to 60 s on a slow query and ours waits 65 s by default; \
                 a shorter timeout turns slow pages into retries"
            ),
        )
    } else {
        Converted::Keys(keys)
    }
}

/// A source's `write.timeout.ms`: a source never writes. A sink's: with `read.timeout.ms`.
pub fn write_timeout(ctx: &Context<'_>, value: &str) -> Converted {
    if !ctx.product.is_sink() {
        return Converted::NotNeeded("a source never writes to ServiceNow".into());
    }
    if ctx.entries.contains_key("read.timeout.ms") {
        return Converted::NotNeeded("taken with read.timeout.ms into snow.http.request.timeout.ms (the larger of the two)".into());
    }
    request_timeout(ctx, value)
}

/// V2's `retry.backoff.policy`.
pub fn backoff_policy(ctx: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_uppercase().as_str() {
        "EXPONENTIAL_WITH_JITTER" | "" => Converted::NotNeeded("exponential with full jitter, as here".into()),
        "CONSTANT_VALUE" => {
            let ms = ctx.entries.get("retry.backoff.ms").map(|v| v.trim().to_string()).unwrap_or_else(|| "3000".into());
            Converted::Review(
                one("snow.retry.backoff.max.ms", ms),
                "no constant backoff here: the ceiling is held at the constant, with jitter below it".into(),
            )
        }
        other => Converted::Manual(format!("{other:?} is not CONSTANT_VALUE or EXPONENTIAL_WITH_JITTER")),
    }
}

/// V2's `retry.backoff.ms`.
pub fn backoff_initial(_: &Context<'_>, value: &str) -> Converted {
    match whole(value) {
        Ok(ms) => Converted::Keys(one("snow.retry.backoff.initial.ms", ms.to_string())),
        Err(e) => e,
    }
}

/// V2's `auth.type`.
pub fn auth_type(_: &Context<'_>, value: &str) -> Converted {
    match value.trim().to_ascii_uppercase().as_str() {
        "BASIC" | "" => Converted::Keys(one("snow.auth.type", "basic")),
        "OAUTH2" => Converted::Keys(one("snow.auth.type", "oauth_client_credentials")),
        other => Converted::Manual(format!("{other:?} is not BASIC or OAUTH2")),
    }
}

/// V2's `oauth2.token.property`.
pub fn token_property(_: &Context<'_>, value: &str) -> Converted {
    only_default(value, &["access_token"], "ServiceNow answers access_token, which is the only property read here")
}

/// V2's `oauth2.client.scope`.
pub fn client_scope(_: &Context<'_>, value: &str) -> Converted {
    only_default(
        value,
        &["any"],
        "no scope is sent with the token request here; restrict the OAuth application's scope in ServiceNow instead",
    )
}

/// V2's `oauth2.jwt.enabled`.
pub fn jwt_enabled(_: &Context<'_>, value: &str) -> Converted {
    only_default(
        value,
        &["false"],
        "JWT bearer grants are not supported: use OAuth client credentials (snow.auth.type=oauth_client_credentials)",
    )
}
