//! A token endpoint's answer (snow-core `auth::oauth`): any status and body, at any time since
//! the cache started. Never a panic (a lifetime near 2^64 included), and no error that quotes the
//! client secret.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use snow_core::auth::Secret;
use snow_core::auth::oauth::{Grant, NextGrant, OAuthConfig, TokenCache};
use snow_core::http::{Response, Timeouts};

fuzz_target!(|data: &[u8]| {
    let (head, body) = data.split_at(data.len().min(4));
    let mut head4 = [0u8; 4];
    head4[..head.len()].copy_from_slice(head);
    let status = 100 + u16::from_be_bytes([head4[0], head4[1]]) % 500;
    let now = Duration::from_secs(u64::from(u16::from_be_bytes([head4[2], head4[3]])));
    let config = OAuthConfig {
        token_url: "https://acme.service-now.com/oauth_token.do".into(),
        client_id: "cid".into(),
        client_secret: Secret::new("Fuzz-Client-Secret-42"),
        grant: Grant::ClientCredentials,
        refresh_margin: Duration::from_secs(60),
        timeouts: Timeouts { connect_ms: 1, first_byte_ms: 1, body_ms: 1 },
    };
    let mut cache = TokenCache::new(config);
    let answer = Response { status, headers: vec![], body: body.to_vec() };
    match cache.accept(NextGrant::Primary, &answer, now) {
        Ok(_) => {
            let _ = cache.valid(now);
        }
        Err(e) => assert!(!e.to_string().contains("Fuzz-Client-Secret-42")),
    }
});
