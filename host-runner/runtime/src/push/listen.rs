//! A standalone run's push listeners: each distinct `snow.push.listen` address is one listener
//! (connectors may share it: the path names the connector), plain or TLS
//! (`snow.push.tls.*`), within the limits of [`crate::listener`]. Every path but
//! `/snow/push/<connector>` is 404, uncounted.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;

use super::endpoint::Endpoint;
use crate::config::ConnectorSpec;
use crate::config::{ConfigError, InvalidConfig};
use crate::shutdown::Shutdown;

/// A standalone run's connectors that take notifications each say where (`snow.push.listen`), and
/// connectors sharing an address agree on its TLS.
pub fn check_standalone(specs: &[ConnectorSpec]) -> Result<()> {
    let mut tls_of: BTreeMap<&str, (&str, Option<&crate::listener::TlsFiles>)> = BTreeMap::new();
    for spec in specs {
        let Some(push) = &spec.push else { continue };
        let Some(listen) = push.listen.as_deref() else {
            return Err(InvalidConfig::one(
                &spec.name,
                ConfigError::missing(
                    "snow.push.listen",
                    format!(
                        "is required with snow.push.secret in a standalone run (HOST:PORT the business rule posts to, at /snow/push/{})",
                        spec.name
                    ),
                ),
            )
            .into());
        };
        match tls_of.get(listen) {
            Some((other, tls)) if tls.map(|t| (&t.certificate, &t.key)) != push.tls.as_ref().map(|t| (&t.certificate, &t.key)) => {
                let why = format!(
                    "connector {other} listens on {listen} too, with other TLS settings; connectors sharing an address share its TLS"
                );
                let errors = ["snow.push.tls.certificate.file", "snow.push.tls.key.file"].map(|key| ConfigError::new(key, why.clone()));
                return Err(InvalidConfig::new(&spec.name, errors.to_vec()).into());
            }
            Some(_) => {}
            None => {
                tls_of.insert(listen, (&spec.name, push.tls.as_ref()));
            }
        }
    }
    Ok(())
}

/// Listens on every connector's `snow.push.listen` until `shutdown`; the addresses bound, by the
/// address configured.
pub async fn serve(specs: &[ConnectorSpec], endpoint: &Endpoint, shutdown: &Shutdown) -> Result<BTreeMap<String, SocketAddr>> {
    check_standalone(specs)?;
    let mut bound = BTreeMap::new();
    for push in specs.iter().filter_map(|s| s.push.as_ref()) {
        let Some(listen) = push.listen.clone() else { continue };
        if bound.contains_key(&listen) {
            continue;
        }
        let listener =
            tokio::net::TcpListener::bind(&listen).await.with_context(|| format!("snow.push.listen: cannot listen on {listen}"))?;
        let address = listener.local_addr()?;
        let tls = match &push.tls {
            Some(files) => Some(crate::listener::tls_acceptor(&files.certificate, &files.key, "snow.push.tls")?),
            None => None,
        };
        let endpoint = endpoint.clone();
        let handler: crate::listener::Handler = Arc::new(move |request| {
            let endpoint = endpoint.clone();
            Box::pin(async move {
                match Endpoint::connector_of(request.uri().path()).map(str::to_string) {
                    Some(connector) => endpoint.answer(&connector, request).await,
                    None => not_found(),
                }
            })
        });
        crate::listener::spawn("the push listener", listener, tls, crate::listener::Limits::default(), handler, shutdown.clone());
        let scheme = if push.tls.is_some() { "https" } else { "http" };
        tracing::info!("push endpoint on {scheme}://{address}/snow/push/<connector>");
        bound.insert(listen, address);
    }
    Ok(bound)
}

fn not_found() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"{\"error\":\"not a push path: POST /snow/push/<connector>\"}")));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}
