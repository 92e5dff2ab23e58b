//! One replica's side of the protocol that keeps the shares of a budget within the budget: what
//! it has seen of its peers' Leases, the share it uses, and the record it publishes. Sans-I/O:
//! the Lease loop ([`super::lease_loop`]) feeds it what the watch delivers and the outcome of
//! each write, and applies the limit it returns; time comes in as a value.
//!
//! The rules (`docs/scale-out.md` has the argument and the worst cases):
//! - **Lower at once.** When the split ([`super::split`]) gives this replica less than it uses,
//!   the limit falls at once, then the lower share is published.
//! - **Raise only into room the others leave, after announcing it.** A replica that wants more
//!   first publishes a *claim* (its share stays). Once its watch has shown its own claim, and then
//!   a later record of every live peer, it knows every peer's record written after the claim
//!   landed; it raises to `min(claim, budget − Σ peers' max(share, claim))` and publishes that
//!   share. One watch stream delivers every Lease's changes in the store's order, so "a later
//!   record" needs no comparison of resource versions. A replica that sees a peer's new claim
//!   renews its own record at once, so a claim is confirmed within a round trip, not a renewal.
//!   A demand that halved or doubled is written before the renewal too (at most four times a
//!   renew period), so the split follows a load that moves within about one renew period.
//! - **Stale or missing information errs smaller.** A peer's record that cannot be read counts as
//!   holding the whole budget; a peer is live while its record changed less than a Lease
//!   duration ago on this replica's clock (as client-go's leader election judges a holder).
//! - **Falling back.** A replica whose writes have not succeeded for two thirds of a Lease
//!   duration (before its peers can judge it gone) falls back to
//!   `min(share, budget / replicas last seen)`; one that could not join (no list within that
//!   time, or no share within a Lease duration) to `budget / max(start_replicas, replicas seen)`.
//!   It serves with that (ready), shows it as a claim so the peers leave it alone, and joins
//!   again (claim, then confirm) once its writes succeed.
//! - **Joining.** A replica that starts is not ready (publishes a share of 0) until its first
//!   claim is confirmed, so it never serves seats it has not been given; the floor it needs is in
//!   every peer's split from the moment its Lease is seen, so the peers make room.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::split::split;

/// What a replica publishes in its Lease (the versioned annotation's content).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The seats it may use now (0 while joining or falling back).
    pub share: u32,
    /// The seats it has announced it wants; at least `share`.
    pub claim: u32,
    /// Its seat demand (in use and waiting), summed over its priority levels.
    pub demand: f64,
    /// Its seat demand per priority level.
    pub levels: BTreeMap<String, f64>,
    /// The writer's number for this record: it grows with every write of one replica process
    /// and starts where the caller says ([`Replica::with_first_seq`]: the start time), so that
    /// a replica tells its own records written since a claim from older ones its watch still
    /// delivers.
    pub seq: u64,
}

impl Record {
    /// The seats the others must leave to this replica: `max(share, claim)`.
    pub fn held(&self) -> u32 {
        self.share.max(self.claim)
    }
}

/// A Lease as this replica read it.
#[derive(Debug, Clone, PartialEq)]
pub enum LeaseState {
    /// Held, with a record that decodes.
    Holding(Record),
    /// Held, but its record is missing or of a version this replica cannot read: it counts as
    /// holding the whole budget.
    Unreadable,
    /// Given up (`holderIdentity` empty): the replica left.
    Released,
}

/// The protocol's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The seats all replicas together may use.
    pub budget: u32,
    /// The seats a live replica keeps to serve every priority level.
    pub floor: u32,
    /// `--coordination-lease-duration`: a peer whose record has not changed for this long is gone.
    pub lease_duration: Duration,
    /// The replicas assumed at start when the Leases cannot be read.
    pub start_replicas: u32,
}

impl Settings {
    /// How often the record is written at the latest: a third of the Lease duration.
    pub fn renew_period(&self) -> Duration {
        self.lease_duration / 3
    }

    /// How long without a successful write before falling back: two thirds of the Lease
    /// duration, so the fall-back comes before the peers judge this replica gone.
    pub fn renew_deadline(&self) -> Duration {
        self.lease_duration * 2 / 3
    }
}

/// Where a replica stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Started, not yet given a share: not ready.
    Joining,
    /// Its share is confirmed and its writes succeed.
    Joined,
    /// Its writes fail (or failed at start): it serves with a conservative share.
    Fallback,
}

/// What this replica knows of one peer.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    /// Its record; `None` when it cannot be read.
    pub record: Option<Record>,
    /// The Lease's resource version when last read.
    pub version: String,
    /// Where in the watch stream it was last delivered.
    pub position: u64,
    /// When this replica last saw the record change, on its own clock.
    pub changed_at: Instant,
}

/// The seat demand a replica measures of itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Demand {
    /// Summed over its levels.
    pub total: f64,
    /// Per priority level.
    pub levels: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Claim {
    seats: u32,
    /// The number of the first record that carries it.
    since: u64,
    /// Where the watch showed this claim (or a larger one) in the store.
    echoed_at: Option<u64>,
}

/// One replica's state.
#[derive(Debug, Clone)]
pub struct Replica {
    id: String,
    settings: Settings,
    phase: Phase,
    limit: u32,
    claim: Option<Claim>,
    peers: BTreeMap<String, Peer>,
    position: u64,
    listed: bool,
    started: Instant,
    last_write_ok: Option<Instant>,
    last_write_attempt: Option<Instant>,
    last_written: Option<Record>,
    replicas_seen: u32,
    demand: Demand,
    /// The share last published, which falls with the seats still in use after a lowering.
    published_share: u32,
    /// A peer announced a new claim: write a record now, so that it can confirm at once.
    ack_due: bool,
    /// The record last handed out for writing.
    last_attempted: Option<u64>,
    next_seq: u64,
    /// Where the watch showed that record, and its claim.
    own_echo: Option<(u64, u32)>,
}

// === impl Replica ===

impl Replica {
    /// A replica `id` that starts at `now`: joining, with the floor as its limit (not ready).
    pub fn new(id: String, settings: Settings, now: Instant) -> Replica {
        Replica {
            id,
            settings,
            phase: Phase::Joining,
            limit: settings.floor.clamp(1, settings.budget.max(1)),
            claim: None,
            peers: BTreeMap::new(),
            position: 0,
            listed: false,
            started: now,
            last_write_ok: None,
            last_write_attempt: None,
            last_written: None,
            replicas_seen: settings.start_replicas.max(1),
            demand: Demand::default(),
            published_share: 0,
            ack_due: false,
            last_attempted: None,
            next_seq: 0,
            own_echo: None,
        }
    }

    /// Numbers its records from `seq` on (a replica that restarts must start above the numbers
    /// of its previous records: the caller passes the start time in microseconds).
    pub fn with_first_seq(mut self, seq: u64) -> Replica {
        self.next_seq = seq;
        self
    }

    /// The replica's id (`holderIdentity`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The protocol's parameters.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Where it stands.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The server concurrency limit to use now (at least 1).
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Its share as it counts against the budget: the limit once joined, else 0.
    pub fn share(&self) -> u32 {
        match self.phase {
            Phase::Joined => self.limit,
            Phase::Joining | Phase::Fallback => 0,
        }
    }

    /// Whether it may take traffic: every phase but joining.
    pub fn is_ready(&self) -> bool {
        self.phase != Phase::Joining
    }

    /// The live replicas it last counted, itself included.
    pub fn replicas_seen(&self) -> u32 {
        self.replicas_seen
    }

    /// The peers it knows of, live or not, by id.
    pub fn peers(&self) -> &BTreeMap<String, Peer> {
        &self.peers
    }

    /// Whether the peer last changed less than a Lease duration before `now`.
    pub fn is_live(&self, peer: &Peer, now: Instant) -> bool {
        now.saturating_duration_since(peer.changed_at) < self.settings.lease_duration
    }

    /// A Lease the watch delivered: `id`'s, at resource version `version`.
    pub fn observe(&mut self, id: &str, version: &str, lease: LeaseState, now: Instant) {
        self.position += 1;
        let position = self.position;
        self.note(id, version, lease, position, now);
    }

    /// A Lease deleted (the watch's `DELETED`).
    pub fn forget(&mut self, id: &str) {
        self.position += 1;
        if id != self.id {
            self.peers.remove(id);
        }
    }

    /// A fresh list of every Lease (after a watch could not go on): peers missing from it are
    /// gone. The peers' records count as older than this replica's own, so a claim seen here
    /// still waits for a later record of every peer.
    pub fn relist(&mut self, leases: Vec<(String, String, LeaseState)>, now: Instant) {
        self.position += 1;
        let peers_at = self.position;
        self.position += 1;
        let own_at = self.position;
        self.peers
            .retain(|id, _| leases.iter().any(|(listed, _, _)| listed == id));
        for (id, version, lease) in leases {
            let position = if id == self.id { own_at } else { peers_at };
            self.note(&id, &version, lease, position, now);
        }
        self.listed = true;
    }

    fn note(&mut self, id: &str, version: &str, lease: LeaseState, position: u64, now: Instant) {
        if id == self.id {
            let LeaseState::Holding(record) = &lease else {
                return;
            };
            if let Some(claim) = &mut self.claim {
                // An older record of its own, still in the watch's backlog, is not an echo.
                if claim.echoed_at.is_none()
                    && record.seq >= claim.since
                    && record.claim >= claim.seats
                {
                    claim.echoed_at = Some(position);
                }
            }
            if self.last_attempted == Some(record.seq) {
                self.own_echo = Some((position, record.claim));
            }
            return;
        }
        let record = match lease {
            LeaseState::Released => {
                self.peers.remove(id);
                return;
            }
            LeaseState::Holding(record) => Some(record),
            LeaseState::Unreadable => None,
        };
        let previous_claim = self
            .peers
            .get(id)
            .and_then(|p| p.record.as_ref())
            .map(|r| r.claim);
        if let Some(r) = &record {
            if r.claim > r.share && previous_claim != Some(r.claim) {
                self.ack_due = true;
            }
        }
        let changed_at = match self.peers.get(id) {
            Some(peer) if peer.version == version => peer.changed_at,
            _ => now,
        };
        let peer = Peer {
            record,
            version: version.to_string(),
            position,
            changed_at,
        };
        self.peers.insert(id.to_string(), peer);
    }

    /// The outcome of writing `record`, attempted at `attempted_at`. A failed write may still
    /// have landed; nothing here relies on it not having.
    pub fn written(&mut self, record: Record, attempted_at: Instant, ok: bool) {
        if ok {
            self.last_write_ok = Some(attempted_at);
            self.last_written = Some(record);
        }
    }

    /// When [`step`](Self::step) must run again at the latest: the next renewal or the
    /// fall-back deadline, whichever comes first.
    pub fn next_step(&self) -> Instant {
        let renew = self
            .last_write_attempt
            .map_or(self.started, |at| at + self.settings.renew_period());
        renew.min(self.deadline())
    }

    fn deadline(&self) -> Instant {
        self.last_write_ok.unwrap_or(self.started) + self.settings.renew_deadline()
    }

    /// Falls back if the writes have failed for too long; what [`step`](Self::step) does first.
    /// Returns whether it fell back just now.
    pub fn check_deadline(&mut self, now: Instant) -> bool {
        let joining_for = now.saturating_duration_since(self.started);
        let stuck = self.phase == Phase::Joining
            && ((!self.listed && joining_for >= self.settings.renew_deadline())
                || joining_for >= self.settings.lease_duration);
        if self.phase == Phase::Fallback || (now < self.deadline() && !stuck) {
            return false;
        }
        let fallback = match self.phase {
            Phase::Joined => self
                .limit
                .min(self.settings.budget / self.replicas_seen.max(1)),
            _ => {
                let replicas = self.settings.start_replicas.max(self.replicas_seen);
                self.settings.budget / replicas.max(1)
            }
        };
        self.limit = fallback.max(1);
        self.phase = Phase::Fallback;
        self.claim = None;
        true
    }

    /// Runs the protocol at `now` with this replica's `demand` and the seats it holds now
    /// (`in_use`): adjusts the limit and returns the record to write, if one is due (a change,
    /// or a renewal). The caller applies [`limit`](Self::limit), writes the record and reports
    /// the outcome to [`written`](Self::written).
    pub fn step(&mut self, now: Instant, demand: Demand, in_use: u32) -> Option<Record> {
        self.demand = demand;
        self.check_deadline(now);
        if self.listed && now < self.deadline() {
            self.replicas_seen = 1 + self.live_peers(now).count() as u32;
            let target = self.target(now);
            self.follow(target, now);
        }
        let record = self.record(in_use);
        let renew_due = self
            .last_write_attempt
            .is_none_or(|at| now >= at + self.settings.renew_period());
        let changed = self
            .last_written
            .as_ref()
            .is_none_or(|last| last.share != record.share || last.claim != record.claim);
        // A demand that halved or doubled is news the peers' split needs before the renewal;
        // at most four times a renew period.
        let demand_moved = self.last_written.as_ref().is_some_and(|last| {
            let (a, b) = (last.demand, record.demand);
            (a - b).abs() >= 1.0_f64.max(a.max(b) / 2.0)
                && self
                    .last_write_attempt
                    .is_none_or(|at| now >= at + self.settings.renew_period() / 4)
        });
        if !(renew_due || changed || self.ack_due || demand_moved) {
            return None;
        }
        self.ack_due = false;
        self.last_write_attempt = Some(now);
        let mut record = record;
        record.seq = self.next_seq;
        self.next_seq += 1;
        self.own_echo = None;
        self.last_attempted = Some(record.seq);
        self.published_share = record.share;
        Some(record)
    }

    /// The record that says where this replica stands.
    fn record(&self, in_use: u32) -> Record {
        let (share, held) = match self.phase {
            // Seats granted under a higher limit still count until they are released.
            Phase::Joined => (self.limit.max(in_use.min(self.published_share)), 0),
            Phase::Joining => (0, 0),
            // Not a share (the peers may have taken it back), but the peers leave it alone
            // while it shows.
            Phase::Fallback => (0, self.limit),
        };
        let claim = self.claim.map_or(share, |c| c.seats).max(share).max(held);
        Record {
            share,
            claim,
            demand: self.demand.total,
            levels: self.demand.levels.clone(),
            seq: 0,
        }
    }

    fn live_peers(&self, now: Instant) -> impl Iterator<Item = (&String, &Peer)> {
        self.peers.iter().filter(move |(_, p)| self.is_live(p, now))
    }

    /// This replica's part of the split among the live replicas, by id.
    fn target(&self, now: Instant) -> u32 {
        let mut demands: Vec<(&str, f64)> = self
            .live_peers(now)
            .map(|(id, p)| (id.as_str(), p.record.as_ref().map_or(0.0, |r| r.demand)))
            .collect();
        demands.push((self.id.as_str(), self.demand.total));
        demands.sort_by(|a, b| a.0.cmp(b.0));
        let values: Vec<f64> = demands.iter().map(|d| d.1).collect();
        let shares = split(self.settings.budget, self.settings.floor, &values);
        demands
            .iter()
            .position(|d| d.0 == self.id)
            .map_or(0, |i| shares[i])
    }

    /// The seats the live peers hold (a record that cannot be read holds the whole budget).
    fn held_by_peers(&self, now: Instant) -> u64 {
        self.live_peers(now)
            .map(|(_, p)| u64::from(p.record.as_ref().map_or(self.settings.budget, Record::held)))
            .sum()
    }

    /// Lowers at once, or claims and then confirms a raise.
    fn follow(&mut self, target: u32, now: Instant) {
        let joined = self.phase == Phase::Joined;
        if joined && target <= self.limit {
            self.claim = None;
            self.limit = target.max(1);
            return;
        }
        self.claim = match self.claim {
            Some(c) if target <= c.seats => Some(Claim { seats: target, ..c }),
            // The store may already show a claim this large: the last record written, seen.
            _ => Some(Claim {
                seats: target,
                since: self.next_seq,
                echoed_at: self
                    .own_echo
                    .filter(|(_, claim)| *claim >= target)
                    .map(|(position, _)| position),
            }),
        };
        let Some(echoed_at) = self.claim.and_then(|c| c.echoed_at) else {
            return;
        };
        let seen_after = self.live_peers(now).all(|(_, p)| p.position > echoed_at);
        if !seen_after {
            return;
        }
        let room = u64::from(self.settings.budget).saturating_sub(self.held_by_peers(now));
        let granted = u32::try_from(room.min(u64::from(target))).unwrap_or(target);
        if joined {
            self.limit = self.limit.max(granted);
            self.claim = None;
        } else if granted >= 1 {
            self.limit = granted;
            self.phase = Phase::Joined;
            self.claim = None;
        }
    }
}

#[cfg(test)]
mod tests;
