//! ServiceNow sessions kept by the host, one pool per guest store.
//!
//! The instance answers every authenticated call with session cookies (`JSESSIONID`,
//! `glide_user_route`, ...). Sending them back saves the instance a new session per request, but
//! the instance serialises the requests of one session (and may drop a write queued behind too many
//! others with a 202), so a session must never carry two requests at once. Each store (a source
//! unit, a sink lane) gets its own [`SessionPool`]: a request checks a session out, and gives it
//! back, with whatever cookies the answer set, when the answer arrived. A request that finds the
//! pool empty (its store already has a request in flight, e.g. a page asked for ahead) goes without
//! cookies and the instance opens a new session for it, which then joins the pool.
//!
//! Cookies never reach the guest (the gate strips `Set-Cookie`, and a guest cannot set `Cookie`).

use std::sync::{Arc, Mutex};

use http::HeaderMap;
use http::header::SET_COOKIE;

/// Sessions one store keeps at most: one per request it may have in flight (a page read ahead, or
/// one per slice of a parallel backfill: at most 32, ADR 0033), so none of them opens a new
/// session on the instance for every request.
const MAX_SESSIONS: usize = 33;

/// The cookies of one session, `name=value` pairs in the order the instance set them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Session {
    cookies: Vec<(String, String)>,
}

impl Session {
    /// The `Cookie` header value; none for a session without cookies.
    pub fn header(&self) -> Option<String> {
        (!self.cookies.is_empty()).then(|| self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; "))
    }

    /// Takes the cookies an answer set (a new value replaces the old one of the same name).
    pub fn absorb(&mut self, headers: &HeaderMap) {
        for value in headers.get_all(SET_COOKIE) {
            let Ok(text) = value.to_str() else { continue };
            let pair = text.split(';').next().unwrap_or("").trim();
            let Some((name, value)) = pair.split_once('=') else { continue };
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() {
                continue;
            }
            match self.cookies.iter_mut().find(|(k, _)| k == name) {
                Some(slot) => slot.1 = value.to_string(),
                None => self.cookies.push((name.to_string(), value.to_string())),
            }
        }
    }
}

/// The idle sessions of one store.
#[derive(Debug, Default, Clone)]
pub struct SessionPool {
    idle: Arc<Mutex<Vec<Session>>>,
}

impl SessionPool {
    /// An idle session, or a new empty one (the instance will open one for the request).
    pub fn check_out(&self) -> Session {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default()
    }

    /// Gives a session back after its request's answer arrived; a full pool drops it.
    pub fn check_in(&self, session: Session) {
        if session.cookies.is_empty() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_SESSIONS {
            idle.push(session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_cookies(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(SET_COOKIE, v.parse().unwrap());
        }
        headers
    }

    #[test]
    fn a_session_is_never_handed_to_two_requests_at_once() {
        let pool = SessionPool::default();
        let mut first = pool.check_out();
        assert_eq!(first.header(), None, "an empty pool: the request goes without cookies");
        first.absorb(&set_cookies(&["JSESSIONID=A1; Path=/; Secure; HttpOnly", "glide_user_route=glide.x; Path=/"]));
        assert_eq!(first.header().as_deref(), Some("JSESSIONID=A1; glide_user_route=glide.x"));
        pool.check_in(first);
        let mut again = pool.check_out();
        assert_eq!(again.header().as_deref(), Some("JSESSIONID=A1; glide_user_route=glide.x"));
        assert_eq!(pool.check_out().header(), None, "while the first is out, a second request gets none");
        again.absorb(&set_cookies(&["JSESSIONID=B2; Path=/"]));
        assert_eq!(again.header().as_deref(), Some("JSESSIONID=B2; glide_user_route=glide.x"), "a new value replaces the old");
    }

    #[test]
    fn the_pool_is_bounded() {
        let pool = SessionPool::default();
        for i in 0..MAX_SESSIONS + 5 {
            let mut s = Session::default();
            s.absorb(&set_cookies(&[&format!("JSESSIONID={i}")]));
            pool.check_in(s);
        }
        let held: Vec<_> = std::iter::from_fn(|| pool.check_out().header()).collect();
        assert_eq!(held.len(), MAX_SESSIONS);
    }
}
