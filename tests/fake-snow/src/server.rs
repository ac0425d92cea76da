//! The HTTP server: one thread with its own runtime, keep-alive HTTP/1.1, faults applied around
//! the handlers, every request journalled with the number in flight.
//!
//! Longer than our 600-line mark: one file is the whole HTTP front of the fake (routing, faults,
//! journal), each route a few lines over the store; the APIs themselves live beside it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::clock::Clock;
use crate::faults::{Fault, FaultAction, Faults};
use crate::journal::{Journal, JournalEntry, Recorder};
use crate::oauth::{Credentials, Principal};
use crate::served::{Served, unix_ms};
use crate::session::Sessions;
use crate::store::{Row, Store};
use crate::table_api::{self, Version, envelope};
use crate::time::http_date;

/// How to start the fake.
#[derive(Debug, Clone, Default)]
pub struct FakeOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Basic users `(name, password)`. With no users and no clients, requests need no auth.
    pub users: Vec<(String, String)>,
    /// OAuth clients `(client_id, client_secret)`.
    pub oauth_clients: Vec<(String, String)>,
    /// Freeze the clock at this time (seconds since the epoch); otherwise it follows real time.
    pub frozen_at: Option<i64>,
    /// Tables to create empty.
    pub tables: Vec<String>,
    /// Users whose time zone is not UTC, with its offset in seconds: their display values of
    /// date-times are shifted, as ServiceNow shows them.
    pub time_zones: Vec<(String, i64)>,
}

/// An HTTP answer before it is sent.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Status.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Answer {
    /// A JSON answer.
    pub fn json(status: u16, value: &impl Serialize) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "application/json;charset=UTF-8".into())],
            body: serde_json::to_vec(value).unwrap_or_default(),
        }
    }
}

/// State shared by every connection.
#[derive(Debug)]
pub struct Shared {
    store: Mutex<Store>,
    /// The REST API rate limit rule, when one is set.
    rate_limit: Mutex<Option<crate::rate_limit::Limiter>>,
    /// The fake's clock (system fields and the `Date` header).
    pub clock: Clock,
    /// Injected faults.
    pub faults: Mutex<Faults>,
    /// The request journal.
    pub journal: Recorder,
    /// Users, OAuth clients and tokens.
    pub credentials: Mutex<Credentials>,
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    /// Whether list answers may carry `X-Total-Count` and `Link` (on by default).
    pagination_headers: std::sync::atomic::AtomicBool,
    /// The sessions opened so far.
    pub sessions: Sessions,
    /// How slow the fake is on purpose (none by default).
    latency: Mutex<Latency>,
    /// Whether the Batch API answers (on by default).
    batch_api: std::sync::atomic::AtomicBool,
    /// What an insert under a sys_id that exists answers: `0` replaces the row (the default),
    /// another status refuses the insert with it and changes nothing (how a real instance answers
    /// is not documented).
    duplicate_insert: std::sync::atomic::AtomicU16,
    /// Each list answer's row versions, when a test switched the log on.
    pub served: crate::served::ServedLog,
}

/// A latency model of an instance: every request costs `request_ms`, and every write it executes
/// `write_ms` more (the items of a batch one after another).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Latency {
    /// Milliseconds every request takes before it is answered.
    pub request_ms: u64,
    /// Milliseconds every executed write (create, update, delete) adds.
    pub write_ms: u64,
    /// How long a batch may run before the rest of its items are left unserviced (30 s if unset).
    pub batch_quota_ms: Option<u64>,
}

impl Shared {
    /// Sets (or, with `None`, removes) the REST API rate limit rule.
    pub fn set_rate_limit(&self, rule: Option<crate::rate_limit::RateLimit>) {
        *self.rate_limit.lock().unwrap_or_else(|e| e.into_inner()) = rule.map(crate::rate_limit::Limiter::new);
    }

    /// The rate limit rule set, if any.
    pub fn rate_limit(&self) -> Option<crate::rate_limit::RateLimit> {
        self.rate_limit.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(crate::rate_limit::Limiter::rule)
    }

    /// Counts an API call against the rule: `Some((seconds to the reset, headers))` when refused.
    fn rate_limited(&self) -> Option<(u64, bool)> {
        let mut limiter = self.rate_limit.lock().unwrap_or_else(|e| e.into_inner());
        let limiter = limiter.as_mut()?;
        limiter.check(std::time::Instant::now()).map(|reset| (reset, limiter.rule().headers))
    }

    /// The store, locked.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether list answers may carry `X-Total-Count` and `Link`.
    pub fn pagination_headers(&self) -> bool {
        self.pagination_headers.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Switches `X-Total-Count` and `Link` on or off for every list answer (off: an instance, or a
    /// proxy in front of it, that never sends them).
    pub fn set_pagination_headers(&self, on: bool) {
        self.pagination_headers.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// The latency model in force.
    pub fn latency(&self) -> Latency {
        *self.latency.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the Batch API answers.
    pub fn batch_api(&self) -> bool {
        self.batch_api.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Turns the Batch API on or off (off: answered 400, as an instance without it).
    pub fn set_batch_api(&self, on: bool) {
        self.batch_api.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Makes the fake as slow as `latency` says from the next request on.
    pub fn set_latency(&self, latency: Latency) {
        *self.latency.lock().unwrap_or_else(|e| e.into_inner()) = latency;
    }

    /// Makes an insert under an existing sys_id answer `status` (and change nothing); `None`: the
    /// insert replaces the row.
    pub fn refuse_duplicate_inserts(&self, status: Option<u16>) {
        self.duplicate_insert.store(status.unwrap_or(0), std::sync::atomic::Ordering::SeqCst);
    }

    /// What an insert under an existing sys_id answers (`None`: it replaces the row).
    pub fn duplicate_insert_status(&self) -> Option<u16> {
        Some(self.duplicate_insert.load(std::sync::atomic::Ordering::SeqCst)).filter(|s| *s != 0)
    }

    /// Hides the rows `ids` of `table` from the API's users (a row-level read ACL).
    pub fn hide_rows(&self, table: &str, ids: impl IntoIterator<Item = String>) -> bool {
        self.store().table_mut(table).map(|t| t.hide_ids(ids)).is_some()
    }

    /// Hides the rows of `table` matching the encoded `query` from the API's users.
    pub fn hide_matching(&self, table: &str, query: &str) -> bool {
        self.store().table_mut(table).map(|t| t.hide_matching(query)).is_some()
    }

    /// Seeds `count` incident-shaped rows into `table`, stamped from `start` with `spread` seconds
    /// between the first and the last (0: all in one second). Returns the new sys_ids in order.
    pub fn seed(&self, table: &str, count: u64, start: i64, spread: u64) -> Vec<String> {
        let mut store = self.store();
        store.create_table(table);
        let first_number = store.table(table).map_or(0, |t| t.len() as u64) + 1;
        let mut ids = Vec::with_capacity(count as usize);
        for i in 0..count {
            let offset = if count > 1 { (i * spread / (count - 1).max(1)) as i64 } else { 0 };
            let ts = start + offset;
            let row = crate::seed::incident(first_number + i, ts, &self.base_url);
            let row = store.insert(table, row, ts, "admin");
            ids.push(row.get("sys_id").and_then(Value::as_str).unwrap_or("").to_string());
        }
        ids
    }

    /// Inserts incident-shaped row number `n` into `table`, stamped at `ts` (a row committed late
    /// when `ts` is in the past); returns its sys_id.
    pub fn insert_at(&self, table: &str, n: u64, ts: i64) -> String {
        let mut store = self.store();
        store.create_table(table);
        let row = store.insert(table, crate::seed::incident(n, ts, &self.base_url), ts, "admin");
        row.get("sys_id").and_then(Value::as_str).unwrap_or("").to_string()
    }

    /// The version row `sys_id` of `table` holds now: `(sys_updated_on, sys_id, sys_mod_count)`.
    pub fn version_of(&self, table: &str, sys_id: &str) -> Option<(String, String, String)> {
        let store = self.store();
        let row = store.table(table)?.get(sys_id)?;
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Some((text("sys_updated_on"), sys_id.to_string(), text("sys_mod_count")))
    }

    /// Deletes the rows `ids` of `table` as `admin` at the clock's current time (recorded in
    /// `sys_audit_delete` when the table's deletes are audited); returns how many existed.
    pub fn delete_rows(&self, table: &str, ids: &[String]) -> usize {
        let now = self.clock.now();
        let mut store = self.store();
        ids.iter().filter(|id| store.delete(table, id, now, "admin").is_some()).count()
    }

    /// Runs the after-commit business rule `rule` from now on (`None`: no rule), posting a
    /// notification after each committed write; returns the running rule, to read its counts.
    pub fn set_push_rule(&self, rule: Option<crate::push::PushRule>) -> Option<Arc<crate::push::Pusher>> {
        let pusher = rule.map(|r| Arc::new(crate::push::Pusher::start(r)));
        self.store().set_pusher(pusher.clone());
        pusher
    }

    /// Sets the `no_audit_delete` attribute of `table`'s collection (deletes leave no audit row).
    pub fn set_no_audit_delete(&self, table: &str, on: bool) {
        let now = self.clock.now();
        self.store().set_no_audit_delete(table, on, now);
    }

    /// Makes every read of `table` fail its table-level read ACL (403), or succeed again.
    pub fn deny_reads(&self, table: &str, on: bool) {
        self.store().deny_reads(table, on);
    }

    /// Applies `changes` to each row of `ids` at the clock's current time; returns how many existed.
    pub fn update_rows(&self, table: &str, ids: &[String], changes: &Row) -> usize {
        let now = self.clock.now();
        let mut store = self.store();
        ids.iter().filter(|id| store.update(table, id, changes.clone(), now, "admin", false).is_some()).count()
    }
}

/// A running fake; stops when dropped.
pub struct FakeSnow {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The error that makes hyper close a connection without answering.
#[derive(Debug)]
struct Hangup;

impl std::fmt::Display for Hangup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fake-snow closed the connection on purpose")
    }
}

impl std::error::Error for Hangup {}

impl FakeSnow {
    /// Binds and starts serving on its own thread.
    pub fn start(options: FakeOptions) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", options.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let mut credentials = Credentials::default();
        credentials.users.extend(options.users.iter().cloned());
        credentials.clients.extend(options.oauth_clients.iter().cloned());
        credentials.time_zones.extend(options.time_zones.iter().cloned());
        let mut store = Store::default();
        for t in &options.tables {
            store.create_table(t);
        }
        // Every instance has these (the audit of deletes empty until a row of an audited table is
        // deleted; the dictionary without entries until a test sets a table's).
        for system in [crate::audit::AUDIT_DELETE, "sys_dictionary", "sys_db_object"] {
            store.create_table(system);
        }
        let clock = Clock::default();
        if let Some(now) = options.frozen_at {
            clock.freeze_at(now);
        }
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            rate_limit: Mutex::new(None),
            clock,
            faults: Mutex::default(),
            journal: Recorder::default(),
            credentials: Mutex::new(credentials),
            base_url: format!("http://{addr}"),
            pagination_headers: std::sync::atomic::AtomicBool::new(true),
            sessions: Sessions::default(),
            latency: Mutex::default(),
            batch_api: std::sync::atomic::AtomicBool::new(true),
            duplicate_insert: std::sync::atomic::AtomicU16::new(0),
            served: Default::default(),
        });
        let (stop, stopped) = oneshot::channel();
        let serving = shared.clone();
        let thread = std::thread::Builder::new().name(format!("fake-snow-{}", addr.port())).spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("fake-snow runtime");
            rt.block_on(serve(listener, serving, stopped));
        })?;
        Ok(Self { shared, addr, stop: Some(stop), thread: Some(thread) })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The shared state (store, clock, faults, journal).
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The shared state, for a thread that outlives this borrow (a writer changing rows).
    pub fn shared_handle(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// Creates an empty table.
    pub fn create_table(&self, table: &str) {
        self.shared.store().create_table(table);
    }

    /// Every row of `table` in insertion order.
    pub fn rows(&self, table: &str) -> Vec<Row> {
        self.shared.store().table(table).map(|t| t.rows_in_order().cloned().collect()).unwrap_or_default()
    }

    /// The text of fields `names` of every row of `table`, in insertion order (a field that is
    /// absent or not text: empty): what a check needs of a large table without copying its rows.
    pub fn fields<const N: usize>(&self, table: &str, names: [&str; N]) -> Vec<[String; N]> {
        let store = self.shared.store();
        let Some(t) = store.table(table) else { return Vec::new() };
        t.rows_in_order().map(|row| names.map(|name| row.get(name).and_then(Value::as_str).unwrap_or_default().to_string())).collect()
    }

    /// How many rows `table` holds.
    pub fn row_count(&self, table: &str) -> usize {
        self.shared.store().table(table).map_or(0, |t| t.len())
    }

    /// Adds a fault rule.
    pub fn add_fault(&self, fault: Fault) {
        self.shared.faults.lock().unwrap_or_else(|e| e.into_inner()).add(fault);
    }

    /// Removes every fault rule: requests are answered normally from now on.
    pub fn clear_faults(&self) {
        self.shared.faults.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Switches the served-versions log on (each list answer's row versions are kept) or off.
    /// Also notes when each version stops being current ([`FakeSnow::superseded_at`]).
    pub fn record_served(&self, on: bool) {
        self.shared.store().keep_supersessions(on);
        self.shared.served.set(on);
    }

    /// When version `(sys_id, mod_count)` of `table` stopped being current (updated or deleted),
    /// in ms since the Unix epoch; `None` while it is current or before [`FakeSnow::record_served`].
    pub fn superseded_at(&self, table: &str, sys_id: &str, mod_count: &str) -> Option<u64> {
        self.shared.store().superseded_at(table, sys_id, mod_count)
    }

    /// The list answers recorded since the served-versions log was switched on.
    pub fn served(&self) -> Vec<Served> {
        self.shared.served.snapshot()
    }

    /// The journal so far.
    pub fn journal(&self) -> Journal {
        self.shared.journal.snapshot()
    }

    /// Adds an OAuth client; `access_ttl_seconds` sets the lifetime of the tokens it gets.
    pub fn add_oauth_client(&self, client_id: &str, client_secret: &str, access_ttl_seconds: Option<i64>) {
        let mut credentials = self.shared.credentials.lock().unwrap_or_else(|e| e.into_inner());
        credentials.clients.insert(client_id.into(), client_secret.into());
        if access_ttl_seconds.is_some() {
            credentials.access_ttl = access_ttl_seconds;
        }
    }

    /// Makes every access token expire now; the next request with one gets a 401.
    pub fn expire_access_tokens(&self) {
        self.shared.credentials.lock().unwrap_or_else(|e| e.into_inner()).expire_access_tokens();
    }

    /// Makes every refresh token invalid.
    pub fn revoke_refresh_tokens(&self) {
        self.shared.credentials.lock().unwrap_or_else(|e| e.into_inner()).revoke_refresh_tokens();
    }

    /// Every token issued so far.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.shared.credentials.lock().unwrap_or_else(|e| e.into_inner()).issued()
    }
}

impl Drop for FakeSnow {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(listener: std::net::TcpListener, shared: Arc<Shared>, mut stopped: oneshot::Receiver<()>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted { Ok(a) => a, Err(_) => continue },
            _ = &mut stopped => return,
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(shared.clone(), req));
            let _ = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

/// Decodes `application/x-www-form-urlencoded` pairs (also used for URL queries).
pub fn form_decode(text: &str) -> HashMap<String, String> {
    fn decode(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => match u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                },
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').map_or((decode(p), String::new()), |(k, v)| (decode(k), decode(v))))
        .collect()
}

/// An answer body: whole, or trickled by a `SlowBody` fault.
type AnswerBody = BoxBody<Bytes, std::convert::Infallible>;

/// A body sent in pieces with a pause between them.
struct Trickle {
    pieces: std::collections::VecDeque<Bytes>,
    gap: Duration,
    pause: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    total: u64,
}

impl hyper::body::Body for Trickle {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        use std::future::Future;
        if let Some(pause) = self.pause.as_mut() {
            if pause.as_mut().poll(cx).is_pending() {
                return std::task::Poll::Pending;
            }
            self.pause = None;
        }
        let next = self.pieces.pop_front();
        if next.is_some() && !self.pieces.is_empty() {
            self.pause = Some(Box::pin(tokio::time::sleep(self.gap)));
        }
        std::task::Poll::Ready(next.map(|b| Ok(hyper::body::Frame::data(b))))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.total)
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<AnswerBody>, Hangup> {
    let in_flight = shared.journal.begin();
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let params = form_decode(req.uri().query().unwrap_or(""));
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(String::from);
    let (authorization, request_id, cookie) = (header("authorization"), header("x-request-id"), header("cookie"));
    let worker = header("x-snow-worker");
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(Hangup),
    };
    let is_admin = path.starts_with("/__fake/");
    let fault = if is_admin { None } else { shared.faults.lock().unwrap_or_else(|e| e.into_inner()).take(&method, &path) };
    let mut entry = JournalEntry {
        seq: in_flight.seq,
        method: method.clone(),
        path: path.clone(),
        query: params.get("sysparm_query").cloned(),
        status: 0,
        auth: "none".into(),
        request_id: request_id.clone(),
        worker,
        in_flight: in_flight.at_start,
        dropped_terms: Vec::new(),
        grant: None,
        at_ms: in_flight.at_ms,
        limit: params.get("sysparm_limit").and_then(|l| l.parse().ok()),
        offset: params.get("sysparm_offset").and_then(|o| o.parse().ok()),
        returned: None,
        session: None,
        session_in_flight: 0,
        done_ms: 0,
        batch_item: None,
        unserviced: None,
        body: (path.starts_with("/api/") && matches!(method.as_str(), "POST" | "PATCH" | "PUT"))
            .then(|| String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned()),
    };
    // Who is asking is recorded before any fault, so the journal shows what every request carried.
    let principal = if is_admin { Principal::Nobody } else { authenticate(&shared, authorization.as_deref()) };
    entry.auth = match &principal {
        Principal::User(u) => format!("basic:{u}"),
        Principal::Bearer(_) => "bearer".into(),
        Principal::Nobody => "none".into(),
    };
    // API calls run in a session (a token request does not: it authenticates the client).
    let session = match &principal {
        Principal::User(_) | Principal::Bearer(_) if path != "/oauth_token.do" => Some(shared.sessions.enter(cookie.as_deref()).await),
        _ => None,
    };
    if let Some(s) = &session {
        entry.session = Some(s.id.clone());
        entry.session_in_flight = s.in_flight_at_start;
    }
    let latency = if is_admin { Latency::default() } else { shared.latency() };
    // One sleep to a deadline: timer overshoot is paid once, not per step.
    let mut cost = latency.request_ms;
    if matches!(method.as_str(), "POST" | "PATCH" | "PUT" | "DELETE") && path.contains("/table/") {
        cost += latency.write_ms;
    }
    if cost > 0 {
        tokio::time::sleep(Duration::from_millis(cost)).await;
    }
    if let Some(FaultAction::Latency { ms }) = &fault {
        tokio::time::sleep(Duration::from_millis(*ms)).await;
    }
    if matches!(fault, Some(FaultAction::DropConnection)) {
        shared.journal.record(entry);
        return Err(Hangup);
    }
    let limited = if is_admin || path == "/oauth_token.do" { None } else { shared.rate_limited() };
    let mut answer = match &fault {
        _ if limited.is_some() => {
            let (reset, headers) = limited.unwrap_or_default();
            let mut a = envelope(429, "Too Many Requests", "the rate limit rule of the fake instance");
            if headers {
                a.headers.push(("Retry-After".into(), reset.to_string()));
                a.headers.push(("X-RateLimit-Reset".into(), (shared.clock.now() + reset as i64).to_string()));
            }
            a
        }
        Some(FaultAction::Status { status, retry_after }) => {
            let mut a = envelope(*status, &format!("Injected fault: status {status}"), "fake-snow fault injection");
            if let Some(r) = retry_after {
                a.headers.push(("Retry-After".into(), r.clone()));
            }
            if *status == 429 {
                // ServiceNow's rate-limit rules answer with these.
                let reset = shared.clock.now() + retry_after.as_deref().and_then(|r| r.parse::<i64>().ok()).unwrap_or(60);
                a.headers.push(("X-RateLimit-Limit".into(), "1000".into()));
                a.headers.push(("X-RateLimit-Reset".into(), reset.to_string()));
                a.headers.push(("X-RateLimit-Rule".into(), "fake-snow-rule".into()));
            }
            a
        }
        _ if is_admin => crate::admin::route(&shared, &method, &path, &body).await,
        _ if method == "POST" && path == "/api/now/v1/batch" && !matches!(principal, Principal::Nobody) => {
            crate::batch::serve(&shared, &principal, &body, &mut entry).await
        }
        _ => route(&shared, &method, &path, &params, &principal, &body, &mut entry),
    };
    match &fault {
        Some(FaultAction::MalformedBody) => {
            answer.status = 200;
            answer.body.truncate(answer.body.len() / 2);
        }
        Some(FaultAction::PadBody { bytes }) => answer.body.extend(std::iter::repeat_n(b' ', *bytes as usize)),
        Some(FaultAction::ReplaceBody { body }) => {
            answer.status = 200;
            answer.body = body.clone().into_bytes();
        }
        Some(FaultAction::TimeoutAfterWrite { stall_ms }) => {
            tokio::time::sleep(Duration::from_millis(*stall_ms)).await;
            shared.journal.record(entry);
            return Err(Hangup);
        }
        _ => {}
    }
    entry.status = answer.status;
    if !is_admin {
        shared.journal.record(entry);
    }
    drop(in_flight);
    let mut response = Response::builder().status(answer.status).header("Date", http_date(shared.clock.now()));
    if let Some(id) = request_id {
        response = response.header("X-Request-Id", id);
    }
    if let Some(s) = session.as_ref().filter(|s| s.opened) {
        // ServiceNow says so with cookies when it opens a session for a call.
        response = response
            .header("Set-Cookie", format!("JSESSIONID={}; Path=/; Secure; HttpOnly", s.id))
            .header("Set-Cookie", "glide_user_route=glide.fake-snow; Path=/; HttpOnly");
    }
    drop(session);
    for (k, v) in &answer.headers {
        response = response.header(k, v);
    }
    let body: AnswerBody = match fault {
        Some(FaultAction::SlowBody { chunks, gap_ms }) => {
            let bytes = Bytes::from(answer.body);
            let size = bytes.len().div_ceil(chunks.max(1) as usize).max(1);
            let pieces = (0..bytes.len()).step_by(size).map(|at| bytes.slice(at..(at + size).min(bytes.len()))).collect();
            Trickle { pieces, gap: Duration::from_millis(gap_ms), pause: None, total: bytes.len() as u64 }.boxed()
        }
        _ => Full::new(Bytes::from(answer.body)).boxed(),
    };
    Ok(response.body(body).unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed())))
}

/// Who sent a request; anyone is a guest when the fake has no users or clients.
fn authenticate(shared: &Shared, authorization: Option<&str>) -> Principal {
    let credentials = shared.credentials.lock().unwrap_or_else(|e| e.into_inner());
    if credentials.required() { credentials.check(authorization, shared.clock.now()) } else { Principal::User("guest".into()) }
}

/// Routes one API call (a request, or an item of a batch).
pub(crate) fn route(
    shared: &Shared,
    method: &str,
    path: &str,
    params: &HashMap<String, String>,
    principal: &Principal,
    body: &[u8],
    entry: &mut JournalEntry,
) -> Answer {
    if path == "/oauth_token.do" && method == "POST" {
        let form = form_decode(std::str::from_utf8(body).unwrap_or(""));
        entry.grant = form.get("grant_type").cloned();
        return match shared.credentials.lock().unwrap_or_else(|e| e.into_inner()).grant(&form, shared.clock.now()) {
            Ok(token) => Answer::json(200, &token),
            Err(error) => Answer::json(401, &serde_json::json!({ "error_description": "access_denied", "error": error })),
        };
    }
    if let Some(id) = path
        .strip_prefix("/api/now/attachment/")
        .or_else(|| path.strip_prefix("/api/now/v1/attachment/"))
        .and_then(|r| r.strip_suffix("/file"))
    {
        if matches!(principal, Principal::Nobody) {
            return envelope(401, "User Not Authenticated", "Required to provide Auth information");
        }
        return match method {
            "GET" => crate::attachment::serve_file(shared, id),
            _ => envelope(405, "Method not Supported", &format!("{method} {path}")),
        };
    }
    let (version, rest) = if let Some(rest) = path.strip_prefix("/api/now/v2/table/") {
        (Version::V2, rest)
    } else if let Some(rest) = path.strip_prefix("/api/now/v1/table/").or_else(|| path.strip_prefix("/api/now/table/")) {
        (Version::V1, rest)
    } else {
        return envelope(400, "Requested URI does not represent any resource", path);
    };
    let user = match principal {
        Principal::User(who) | Principal::Bearer(who) => who.clone(),
        Principal::Nobody => return envelope(401, "User Not Authenticated", "Required to provide Auth information"),
    };
    let offset = shared.credentials.lock().unwrap_or_else(|e| e.into_inner()).time_zones.get(&user).copied().unwrap_or(0);
    let mut parts = rest.splitn(2, '/');
    let table = parts.next().unwrap_or("");
    let id = parts.next().filter(|s| !s.is_empty());
    match (method, id) {
        ("GET", None) => {
            let listed = table_api::list(shared, table, params, version, offset);
            entry.dropped_terms = listed.dropped;
            entry.returned = Some(listed.returned);
            if let Some(versions) = listed.versions {
                let served = Served { table: table.to_string(), worker: entry.worker.clone(), unix_ms: unix_ms(), versions };
                shared.served.record(served);
            }
            listed.answer
        }
        ("GET", Some(id)) => table_api::get(shared, table, id, params, offset),
        ("POST", None) => table_api::create(shared, table, body, &user),
        ("PATCH", Some(id)) => table_api::update(shared, table, id, body, &user, false),
        ("PUT", Some(id)) => table_api::update(shared, table, id, body, &user, true),
        ("DELETE", Some(id)) => table_api::delete(shared, table, id, &user),
        _ => envelope(405, "Method not Supported", &format!("{method} {path}")),
    }
}
