//! Sessions as the instance keeps them: a request without a known `JSESSIONID` cookie opens a new
//! session (answered with `Set-Cookie`); the requests of one session are served one after another,
//! and the journal records how many requests of its session were in flight when one arrived (more
//! than one means two writers shared a session, which the instance would serialise).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The sessions the fake opened.
#[derive(Debug, Default)]
pub struct Sessions {
    next: Mutex<u64>,
    open: Mutex<HashMap<String, Arc<SessionState>>>,
}

#[derive(Debug, Default)]
struct SessionState {
    in_flight: Mutex<usize>,
    serial: Arc<tokio::sync::Mutex<()>>,
}

/// A request inside its session; the session's next request waits until this one is dropped.
pub struct InSession {
    /// The session's id (the `JSESSIONID` value).
    pub id: String,
    /// Whether the session was opened for this request (the answer then sets the cookie).
    pub opened: bool,
    /// Requests of this session in flight when this one arrived (itself included).
    pub in_flight_at_start: usize,
    state: Arc<SessionState>,
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for InSession {
    fn drop(&mut self) {
        *self.state.in_flight.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
    }
}

impl Sessions {
    /// Enters the session the `Cookie` header names, or a new one; waits for the session's turn.
    pub async fn enter(&self, cookie: Option<&str>) -> InSession {
        let named = cookie.and_then(|c| c.split(';').find_map(|p| p.trim().strip_prefix("JSESSIONID=").map(str::to_string)));
        let (id, state, opened) = {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            match named.and_then(|id| open.get(&id).map(|s| (id, s.clone()))) {
                Some((id, state)) => (id, state, false),
                None => {
                    let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
                    *next += 1;
                    let id = format!("{:032X}", next.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    let state = Arc::new(SessionState::default());
                    open.insert(id.clone(), state.clone());
                    (id, state, true)
                }
            }
        };
        let in_flight_at_start = {
            let mut n = state.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n
        };
        let turn = Some(state.serial.clone().lock_owned().await);
        InSession { id, opened, in_flight_at_start, state, _turn: turn }
    }
}
