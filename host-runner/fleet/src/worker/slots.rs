//! Work slots shared by Kafka's group protocol (ADR 0023). The partitions of `work.slots.topic`
//! are the slots; every worker of the fleet subscribes to it in consumer group `group.id` with the
//! `cooperative-sticky` assignor, so Kafka's group coordinator decides which worker holds which
//! slot and a rebalance moves only the slots that must move. Nothing is ever produced to the
//! topic: the consumer exists for its membership.
//!
//! A unit (a source table) belongs to the slot that rendezvous hashing of `(connector, unit)`
//! picks ([`slot_of`]): every worker computes the same answer from the same plan, and a change of
//! slot count moves only the units whose best slot changed.
//!
//! The consumer runs on its own thread. A revocation blocks inside the rebalance callback until
//! the worker stopped the units of the revoked slots (their offsets stored), so the next owner is
//! assigned a slot only once nothing of it runs here. Assignments are passed on after the fact.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use tokio::sync::mpsc;

use super::config::WorkerConfig;

/// Longest a revocation waits for the worker to stop the slots' units.
const REVOKE_LIMIT: Duration = Duration::from_secs(120);

/// The slot of unit `unit` of `connector` among `slots` slots: the one whose hash with the unit
/// is highest (rendezvous hashing).
pub fn slot_of(connector: &str, unit: &str, slots: i32) -> i32 {
    let unit = snow_core::cursor::position::fnv1a64(format!("{connector}\u{0}{unit}").as_bytes());
    (0..slots.max(1)).max_by_key(|n| mix(unit ^ (*n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))).unwrap_or(0)
}

/// SplitMix64's finaliser: every input bit moves every output bit (FNV alone does not, for the
/// last bytes), so scores are independent across slots. Stable forever: placements depend on it.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A change of the slots this worker holds.
#[derive(Debug)]
pub enum SlotEvent {
    /// These slots are now this worker's.
    Assigned(Vec<i32>),
    /// The group has this many members (when it changed): the instances' budgets are shared.
    Members(u32),
    /// These slots are being taken away: stop their units, then answer on `done`.
    Revoked {
        /// The slots.
        slots: Vec<i32>,
        /// Whether they were lost (the session expired) rather than handed over.
        lost: bool,
        /// Answer once their units stopped.
        done: std::sync::mpsc::Sender<()>,
    },
}

struct SlotContext {
    events: mpsc::UnboundedSender<SlotEvent>,
}

impl ClientContext for SlotContext {}

impl ConsumerContext for SlotContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            let slots: Vec<i32> = list.elements().iter().map(|e| e.partition()).collect();
            if slots.is_empty() {
                return;
            }
            let lost = consumer.assignment_lost();
            let (done, stopped) = std::sync::mpsc::channel();
            tracing::info!(?slots, lost, "work slots revoked; stopping their units");
            if self.events.send(SlotEvent::Revoked { slots, lost, done }).is_ok() && stopped.recv_timeout(REVOKE_LIMIT).is_err() {
                tracing::warn!(
                    "the units of revoked slots did not stop within {REVOKE_LIMIT:?}; handing the slots over anyway (their writes are fenced)"
                );
            }
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                let slots: Vec<i32> = list.elements().iter().map(|e| e.partition()).collect();
                if !slots.is_empty() {
                    tracing::info!(?slots, "work slots assigned");
                    let _ = self.events.send(SlotEvent::Assigned(slots));
                }
            }
            Rebalance::Error(e) => tracing::warn!("a work slot rebalance failed: {e}"),
            Rebalance::Revoke(_) => {}
        }
    }
}

/// How often the group's members are counted.
const MEMBERS_EVERY: Duration = Duration::from_secs(5);

/// The members of `group`, as its coordinator lists them; none when it cannot be asked now.
fn group_members(consumer: &BaseConsumer<SlotContext>, group: &str) -> Option<u32> {
    let list = consumer.fetch_group_list(Some(group), Duration::from_secs(2)).ok()?;
    list.groups().iter().find(|g| g.name() == group).map(|g| g.members().len() as u32)
}

/// The worker's membership of the fleet's group; dropping it leaves the group (after its
/// revocation is handled or its receiver is gone).
pub struct Membership {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Membership {
    /// Joins the group on the slots topic (created beforehand); slot changes arrive on the
    /// returned receiver.
    pub fn join(config: &WorkerConfig) -> Result<(Self, mpsc::UnboundedReceiver<SlotEvent>)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut client = config.clients().config();
        client
            .set("group.id", &config.group)
            .set("client.id", format!("snow-connect-worker-{}", config.worker_id))
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", config.session_timeout.as_millis().to_string())
            .set("heartbeat.interval.ms", config.heartbeat_interval.as_millis().to_string())
            .set("enable.auto.commit", "false");
        let consumer: BaseConsumer<SlotContext> =
            client.create_with_context(SlotContext { events: tx.clone() }).context("creating the work slot consumer")?;
        consumer.subscribe(&[&config.slots.name]).with_context(|| format!("joining group {} on {}", config.group, config.slots.name))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (group, members_tx) = (config.group.clone(), tx);
        let thread = std::thread::Builder::new().name("work-slots".into()).spawn(move || {
            let (mut counted, mut members) = (None::<std::time::Instant>, 0u32);
            while !flag.load(Ordering::SeqCst) {
                if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                    tracing::warn!("the work slot consumer: {e}");
                }
                if counted.is_none_or(|at| at.elapsed() >= MEMBERS_EVERY) {
                    counted = Some(std::time::Instant::now());
                    let now = group_members(&consumer, &group);
                    if now.is_some_and(|n| n > 0 && n != members) {
                        members = now.unwrap_or(members);
                        tracing::info!(members, "the fleet has {members} workers: each spends 1/{members} of an instance's request budget");
                        let _ = members_tx.send(SlotEvent::Members(members));
                    }
                }
            }
            // Leaving the group: librdkafka revokes what is held (the callback's receiver may be
            // gone by now: then it returns at once) and tells the coordinator, so the slots move
            // without waiting for the session timeout.
            consumer.unsubscribe();
            let _ = consumer.poll(Duration::from_millis(100));
        })?;
        Ok((Self { stop, thread: Some(thread) }, rx))
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_spreads_units_and_moves_few_when_slots_change() {
        let units: Vec<String> = (0..1000).map(|i| format!("table_{i}")).collect();
        let at = |slots: i32| -> Vec<i32> { units.iter().map(|u| slot_of("c", u, slots)).collect() };
        let (a, b) = (at(32), at(33));
        let mut per_slot = [0usize; 32];
        for s in &a {
            per_slot[*s as usize] += 1;
        }
        assert!(per_slot.iter().all(|n| (10..=60).contains(n)), "roughly even: {per_slot:?}");
        let moved = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(moved < 80, "adding a slot moves about 1/33 of the units, moved {moved}");
        assert!(a.iter().zip(&b).all(|(x, y)| x == y || *y == 32), "a unit that moves, moves to the new slot");
        assert_eq!(slot_of("c", "incident", 32), slot_of("c", "incident", 32), "stable");
    }
}
