//! The operator's HTTP endpoint (`snow-connect run --status-listen ADDR`): `GET /status` answers
//! every unit's state as JSON ([`crate::status`]), `GET /metrics` the process's metrics in the
//! Prometheus text format. Read-only; it binds where it is told (keep it on a private address) and
//! stops with the process.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use http_body_util::Full;
use tokio::net::TcpListener;

use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::status::StatusBoard;

/// What the endpoint reads.
#[derive(Clone)]
pub struct Admin {
    /// Units' states.
    pub status: StatusBoard,
    /// The process's metrics.
    pub metrics: Metrics,
}

/// Binds `addr` and returns the bound address; serves until `shutdown` fires, within the
/// listener's limits ([`crate::listener`]).
pub async fn serve(addr: &str, admin: Admin, shutdown: Shutdown) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await.with_context(|| format!("--status-listen {addr}: cannot listen there"))?;
    let bound = listener.local_addr()?;
    let handler: crate::listener::Handler = std::sync::Arc::new(move |request| {
        let answer = answer(&admin, request.method(), request.uri().path());
        Box::pin(async move { answer })
    });
    crate::listener::spawn("the status listener", listener, None, crate::listener::Limits::default(), handler, shutdown);
    Ok(bound)
}

/// The answer to `method path`.
fn answer(admin: &Admin, method: &Method, path: &str) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        if let Ok(value) = content_type.parse() {
            response.headers_mut().insert(header::CONTENT_TYPE, value);
        }
        response
    };
    if method != Method::GET {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "only GET\n".into());
    }
    match path {
        "/status" => {
            let units = admin.status.snapshot();
            let body = serde_json::json!({ "units": units });
            reply(StatusCode::OK, "application/json", format!("{body}\n"))
        }
        "/metrics" => reply(StatusCode::OK, "text/plain; version=0.0.4", admin.metrics.prometheus_text()),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "GET /status or /metrics\n".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::UnitState;

    #[test]
    fn status_and_metrics_are_answered_and_other_paths_are_not() {
        let admin = Admin { status: StatusBoard::default(), metrics: Metrics::default() };
        admin.status.set("c", "acl_t", UnitState::Parked, Some("the integration user may not read table acl_t"));
        admin.metrics.counter_add("snow_source_records_total", 3, &crate::metrics::labels(&[("connector", "c")]));
        let status = answer(&admin, &Method::GET, "/status");
        assert_eq!(status.status(), StatusCode::OK);
        let metrics = answer(&admin, &Method::GET, "/metrics");
        assert_eq!(metrics.headers()[header::CONTENT_TYPE], "text/plain; version=0.0.4");
        assert_eq!(answer(&admin, &Method::GET, "/other").status(), StatusCode::NOT_FOUND);
        assert_eq!(answer(&admin, &Method::POST, "/status").status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
