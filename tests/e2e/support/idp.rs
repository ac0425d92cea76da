//! An OpenID Connect identity provider for Kafka's OAUTHBEARER, made of scripted answers
//! (wiremock): a client-credentials token endpoint that signs a fresh JWT (RS256, short-lived)
//! for each known client and answers 401 `invalid_client` to anyone else, and the JWKS document a
//! broker verifies the signatures with. It records when it issued each client's tokens, so a test
//! can wait for a token to have expired and been replaced.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{KeyPair, RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The `kid` of the provider's only signing key.
const KEY_ID: &str = "snow-test-key";

/// A client the provider knows.
#[derive(Debug, Clone)]
pub struct Client {
    pub id: String,
    pub secret: String,
    /// The token's `sub`: the principal the broker sees (`User:<subject>`).
    pub subject: String,
    /// The token's `aud`, when it must differ from the provider's (a token meant for another
    /// service, which the broker must refuse).
    pub audience: Option<String>,
}

/// The running provider. Its server lives on wiremock's own thread as long as this value.
pub struct Idp {
    server: MockServer,
    runtime: tokio::runtime::Runtime,
    issued: Arc<Mutex<BTreeMap<String, Vec<Instant>>>>,
    /// The `aud` its tokens carry by default (what the broker expects).
    pub audience: String,
}

/// Signs one client's tokens.
struct Issuer {
    key: Arc<RsaKeyPair>,
    client: Client,
    issuer: String,
    audience: String,
    lifetime: Duration,
    issued: Arc<Mutex<BTreeMap<String, Vec<Instant>>>>,
}

impl Respond for Issuer {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let header = json!({ "alg": "RS256", "typ": "JWT", "kid": KEY_ID });
        let claims = json!({
            "iss": self.issuer,
            "aud": self.client.audience.as_deref().unwrap_or(&self.audience),
            "sub": self.client.subject,
            "scope": "kafka",
            "iat": now,
            "exp": now + self.lifetime.as_secs(),
        });
        let input = format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let mut signature = vec![0; self.key.public_modulus_len()];
        self.key.sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), input.as_bytes(), &mut signature).expect("signing a token");
        self.issued.lock().unwrap().entry(self.client.id.clone()).or_default().push(Instant::now());
        ResponseTemplate::new(200).set_body_json(json!({
            "access_token": format!("{input}.{}", URL_SAFE_NO_PAD.encode(&signature)),
            "token_type": "Bearer",
            "expires_in": self.lifetime.as_secs(),
        }))
    }
}

impl Idp {
    /// Starts a provider for `clients`, whose tokens are valid for `lifetime` and meant for
    /// `audience`.
    pub fn start(clients: &[Client], lifetime: Duration, audience: &str) -> Idp {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime for wiremock");
        let server = runtime.block_on(MockServer::start());
        let key = Arc::new(RsaKeyPair::generate(KeySize::Rsa2048).expect("an RSA key"));
        let issued = Arc::new(Mutex::new(BTreeMap::new()));
        let public = key.public_key();
        let jwks = json!({ "keys": [{
            "kty": "RSA", "use": "sig", "alg": "RS256", "kid": KEY_ID,
            "n": URL_SAFE_NO_PAD.encode(public.modulus().big_endian_without_leading_zero()),
            "e": URL_SAFE_NO_PAD.encode(public.exponent().big_endian_without_leading_zero()),
        }]});
        runtime.block_on(async {
            Mock::given(method("GET")).and(path("/jwks")).respond_with(ResponseTemplate::new(200).set_body_json(jwks)).mount(&server).await;
            for client in clients {
                let basic = format!("Basic {}", STANDARD.encode(format!("{}:{}", client.id, client.secret)));
                let issuer = Issuer {
                    key: key.clone(),
                    client: client.clone(),
                    issuer: server.uri(),
                    audience: audience.to_string(),
                    lifetime,
                    issued: issued.clone(),
                };
                Mock::given(method("POST"))
                    .and(path("/oauth2/token"))
                    .and(header("authorization", basic.as_str()))
                    .respond_with(issuer)
                    .mount(&server)
                    .await;
            }
            // Anyone else: the answer an OAuth server gives a client it does not know.
            Mock::given(method("POST"))
                .and(path("/oauth2/token"))
                .respond_with(ResponseTemplate::new(401).set_body_json(json!({ "error": "invalid_client" })))
                .with_priority(10)
                .mount(&server)
                .await;
        });
        Idp { server, runtime, issued, audience: audience.to_string() }
    }

    /// The token endpoint clients ask.
    pub fn token_url(&self) -> String {
        format!("{}/oauth2/token", self.server.uri())
    }

    /// The JWKS document a broker verifies tokens with.
    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.server.uri())
    }

    /// The `iss` of its tokens.
    pub fn issuer(&self) -> String {
        self.server.uri()
    }

    /// When it issued `client`'s tokens, oldest first.
    pub fn issued(&self, client: &str) -> Vec<Instant> {
        self.issued.lock().unwrap().get(client).cloned().unwrap_or_default()
    }

    /// How many token requests it refused (unknown client or wrong secret).
    pub fn refused(&self) -> usize {
        let requests = self.runtime.block_on(self.server.received_requests()).unwrap_or_default();
        let issued: usize = self.issued.lock().unwrap().values().map(Vec::len).sum();
        requests.iter().filter(|r| r.url.path() == "/oauth2/token").count().saturating_sub(issued)
    }
}
