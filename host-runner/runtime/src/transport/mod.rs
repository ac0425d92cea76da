//! The process's HTTP client: keep-alive connections shared by every request of the process
//! ([`pool`]), reaching each destination the way its [`Route`] says — directly or through a
//! forward [`proxy`], with the default trust or a [`tls`] profile (private CAs, client
//! certificates) — and the host's own requests (OAuth tokens, the schema registry, the migration's
//! REST calls) sent on it whole ([`plain`]). What may be sent where is not decided here: guest
//! requests pass the outbound gate first ([`crate::outbound`]).

pub mod plain;
pub mod pool;
pub mod proxy;
pub mod tls;

use std::sync::Arc;

use snow_core::http::NOT_SENT;
use wasmtime_wasi_http::Error as HttpError;

use proxy::Proxy;
use tls::TlsProfile;

/// How requests to one destination of a connector go out: through `proxy` (none: directly; a host
/// on its no-proxy list: directly too), with `tls` (none: the Mozilla roots, no client
/// certificate). Routes with equal settings share connections.
#[derive(Clone, Debug, Default)]
pub struct Route {
    /// The forward proxy.
    pub proxy: Option<Arc<Proxy>>,
    /// The TLS settings.
    pub tls: Option<TlsProfile>,
    /// The key prefix of the TLS settings for this destination (e.g. `snow.instance.ssl`), named
    /// when TLS fails.
    pub tls_keys: Option<Arc<str>>,
}

impl Route {
    /// What tells routes apart: the proxy's and the TLS profile's ids (0: none).
    pub fn id(&self) -> (u64, u64) {
        (self.proxy.as_ref().map_or(0, |p| p.id()), self.tls.as_ref().map_or(0, TlsProfile::id))
    }

    /// The error for a TLS handshake with `authority` that failed with `error`.
    fn tls_failed(&self, authority: &str, error: &std::io::Error) -> HttpError {
        let cause = error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
        not_sent(format!("TLS with {authority} failed: {error}{}", cause.map(|c| self.hint(c)).unwrap_or_default()))
    }

    /// `error` from sending a request; a TLS alert refusing the client's certificate (TLS 1.3
    /// sends it after the client finished its half of the handshake, so it meets the first request)
    /// becomes the same clear error as a failed handshake: the server processed nothing.
    fn refused_mid_handshake(&self, authority: &str, error: hyper::Error) -> HttpError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&error);
        while let Some(cause) = source {
            if let Some(tls) = cause.downcast_ref::<rustls::Error>().or_else(|| {
                cause.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()).and_then(|inner| inner.downcast_ref::<rustls::Error>())
            }) && let rustls::Error::AlertReceived(_) = tls
            {
                return not_sent(format!("TLS with {authority} failed: {tls}{}", self.hint(tls)));
            }
            source = cause.source();
        }
        HttpError::from(error)
    }

    /// What to do about `cause`, naming the settings' keys.
    fn hint(&self, cause: &rustls::Error) -> String {
        use rustls::{AlertDescription as Alert, CertificateError as Cert};
        let keys = self.tls_keys.as_deref().unwrap_or("the TLS settings");
        match cause {
            rustls::Error::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => {
                format!(" (its certificate is not signed by a CA trusted here: give the CA in {keys}.truststore.location, PEM or PKCS#12)")
            }
            rustls::Error::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
                " (its certificate does not name the host of the URL)".to_string()
            }
            rustls::Error::AlertReceived(Alert::CertificateRequired) => {
                format!(" (the server requires a client certificate: set {keys}.keystore.location)")
            }
            rustls::Error::AlertReceived(Alert::BadCertificate | Alert::UnknownCA | Alert::CertificateUnknown | Alert::AccessDenied) => {
                format!(" (the server did not accept the client certificate of {keys}.keystore.*)")
            }
            _ => String::new(),
        }
    }
}

/// A failure before anything of the request reached the destination, with `message`: the guest
/// takes it as "nothing was sent" (snow-core's [`NOT_SENT`]) and shows the message.
pub(crate) fn not_sent(message: impl std::fmt::Display) -> HttpError {
    HttpError::InternalError(Some(format!("{NOT_SENT}{message}")))
}
