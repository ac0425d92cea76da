//! `X-Request-Id` values: one per logical request, the same on each of its retries, unique
//! enough to find the request in ServiceNow's and the host's logs.

/// Issues request ids `snow-<16 hex of a random prefix>-<counter>`.
#[derive(Debug, Clone)]
pub struct RequestIds {
    prefix: u64,
    counter: u64,
}

impl RequestIds {
    /// Ids with the random `prefix`.
    pub fn new(prefix: u64) -> Self {
        Self { prefix, counter: 0 }
    }

    /// The next id.
    pub fn next_id(&mut self) -> String {
        self.counter += 1;
        format!("snow-{:016x}-{}", self.prefix, self.counter)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_distinct() {
        let mut ids = super::RequestIds::new(0xabc);
        assert_eq!(ids.next_id(), "snow-0000000000000abc-1");
        assert_ne!(ids.next_id(), ids.next_id());
    }
}
