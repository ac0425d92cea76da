//! Credentials the fake accepts: Basic users, and OAuth clients with the `password`,
//! `client_credentials` and `refresh_token` grants of `/oauth_token.do`.

use std::collections::HashMap;

use serde::Serialize;

/// Issued tokens and known principals.
#[derive(Debug, Default)]
pub struct Credentials {
    /// user → password.
    pub users: HashMap<String, String>,
    /// client id → secret.
    pub clients: HashMap<String, String>,
    /// user → time zone offset in seconds (display values are shown in it); UTC when absent.
    pub time_zones: HashMap<String, i64>,
    /// Access token lifetime in seconds (30 minutes, ServiceNow's default, when unset).
    pub access_ttl: Option<i64>,
    access: HashMap<String, (String, i64)>,
    refresh: HashMap<String, (String, String)>,
    issued: Vec<String>,
    counter: u64,
}

/// A successful token answer.
#[derive(Debug, Serialize)]
pub struct TokenAnswer {
    /// The access token.
    pub access_token: String,
    /// A refresh token.
    pub refresh_token: String,
    /// Always `useraccount`.
    pub scope: &'static str,
    /// Always `Bearer`.
    pub token_type: &'static str,
    /// Seconds until the access token expires.
    pub expires_in: i64,
}

/// Who a request is, if anyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Valid Basic credentials of this user.
    User(String),
    /// A valid bearer token issued to this user or client.
    Bearer(String),
    /// No or invalid credentials.
    Nobody,
}

impl Credentials {
    /// True when requests must authenticate (some user or client is configured).
    pub fn required(&self) -> bool {
        !self.users.is_empty() || !self.clients.is_empty()
    }

    /// Checks an `Authorization` header value at time `now`.
    pub fn check(&self, authorization: Option<&str>, now: i64) -> Principal {
        let Some(value) = authorization else { return Principal::Nobody };
        if let Some(encoded) = value.strip_prefix("Basic ") {
            let Some(decoded) = decode_base64(encoded.trim()) else { return Principal::Nobody };
            let Some((user, password)) = decoded.split_once(':') else { return Principal::Nobody };
            return if self.users.get(user).is_some_and(|p| p == password) { Principal::User(user.into()) } else { Principal::Nobody };
        }
        if let Some(token) = value.strip_prefix("Bearer ") {
            return match self.access.get(token.trim()) {
                Some((who, expires)) if *expires > now => Principal::Bearer(who.clone()),
                _ => Principal::Nobody,
            };
        }
        Principal::Nobody
    }

    /// Makes every access token expire now (refresh tokens stay valid).
    pub fn expire_access_tokens(&mut self) {
        for (_, expires) in self.access.values_mut() {
            *expires = i64::MIN;
        }
    }

    /// Makes every refresh token invalid.
    pub fn revoke_refresh_tokens(&mut self) {
        self.refresh.clear();
    }

    /// Every token issued so far (access and refresh), for tests that look for leaks.
    pub fn issued(&self) -> Vec<String> {
        self.issued.clone()
    }

    /// Handles a token request (form fields) at time `now`.
    pub fn grant(&mut self, form: &HashMap<String, String>, now: i64) -> Result<TokenAnswer, &'static str> {
        let field = |k: &str| form.get(k).map(String::as_str).unwrap_or("");
        let client_ok = self.clients.get(field("client_id")).is_some_and(|s| s == field("client_secret"));
        if !client_ok {
            return Err("invalid_client");
        }
        let who = match field("grant_type") {
            "password" if self.users.get(field("username")).is_some_and(|p| p == field("password")) => field("username").to_string(),
            "password" => return Err("access_denied"),
            "client_credentials" => field("client_id").to_string(),
            "refresh_token" => match self.refresh.get(field("refresh_token")) {
                Some((client, who)) if client == field("client_id") => who.clone(),
                _ => return Err("invalid_grant"),
            },
            _ => return Err("unsupported_grant_type"),
        };
        self.counter += 1;
        let access_token = format!("at-{:08}-{}", self.counter, now);
        let refresh_token = format!("rt-{:08}-{}", self.counter, now);
        let ttl = self.access_ttl.unwrap_or(1800);
        self.access.insert(access_token.clone(), (who.clone(), now + ttl));
        self.issued.push(access_token.clone());
        self.issued.push(refresh_token.clone());
        self.refresh.insert(refresh_token.clone(), (field("client_id").to_string(), who));
        Ok(TokenAnswer { access_token, refresh_token, scope: "useraccount", token_type: "Bearer", expires_in: ttl })
    }
}

fn decode_base64(text: &str) -> Option<String> {
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_and_bearer() {
        let mut c = Credentials::default();
        c.users.insert("admin".into(), "pw".into());
        c.clients.insert("cid".into(), "cs".into());
        assert!(c.required());
        assert_eq!(c.check(Some("Basic YWRtaW46cHc="), 0), Principal::User("admin".into()));
        assert_eq!(c.check(Some("Basic YWRtaW46eA=="), 0), Principal::Nobody);
        let form: HashMap<String, String> = [("grant_type", "client_credentials"), ("client_id", "cid"), ("client_secret", "cs")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let t = c.grant(&form, 100).unwrap();
        assert_eq!(c.check(Some(&format!("Bearer {}", t.access_token)), 101), Principal::Bearer("cid".into()));
        assert_eq!(c.check(Some(&format!("Bearer {}", t.access_token)), 100 + t.expires_in), Principal::Nobody);
        let refresh: HashMap<String, String> =
            [("grant_type", "refresh_token"), ("client_id", "cid"), ("client_secret", "cs"), ("refresh_token", t.refresh_token.as_str())]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert!(c.grant(&refresh, 200).is_ok());
    }
}
