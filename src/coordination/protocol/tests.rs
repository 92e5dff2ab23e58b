use std::time::Duration;

use proptest::prelude::*;

use super::*;

const D: Duration = Duration::from_secs(15);

fn settings(budget: u32, floor: u32) -> Settings {
    Settings {
        budget,
        floor,
        lease_duration: D,
        start_replicas: 3,
    }
}

fn demand(total: f64) -> Demand {
    Demand {
        total,
        levels: BTreeMap::from([("workload-low".to_string(), total)]),
    }
}

/// The peers and the store, in one process: a linearizable store of Leases, one ordered log of
/// its changes, and per replica a cursor into that log (its watch), which may lag arbitrarily.
struct Model {
    now: Instant,
    budget: u32,
    replicas: Vec<Node>,
    store: BTreeMap<String, (u64, Record)>,
    log: Vec<(String, u64, Option<Record>)>,
    revision: u64,
}

struct Node {
    replica: Replica,
    cursor: usize,
    running: bool,
    connected: bool,
    demand: f64,
}

impl Model {
    fn new(count: usize, budget: u32, floor: u32) -> Model {
        let now = Instant::now();
        let replicas = (0..count)
            .map(|i| Node {
                replica: Replica::new(format!("r{i}"), settings(budget, floor), now),
                cursor: 0,
                running: true,
                connected: true,
                demand: 0.0,
            })
            .collect();
        Model {
            now,
            budget,
            replicas,
            store: BTreeMap::new(),
            log: Vec::new(),
            revision: 0,
        }
    }

    fn write(&mut self, id: String, record: Option<Record>) {
        self.revision += 1;
        match &record {
            Some(r) => {
                self.store.insert(id.clone(), (self.revision, r.clone()));
            }
            None => {
                self.store.remove(&id);
            }
        }
        self.log.push((id, self.revision, record));
    }

    fn step(&mut self, i: usize) {
        let now = self.now;
        let node = &mut self.replicas[i];
        if !node.running {
            return;
        }
        let Some(record) = node.replica.step(now, demand(node.demand), 0) else {
            return;
        };
        let ok = node.connected;
        node.replica.written(record.clone(), now, ok);
        if ok {
            let id = node.replica.id().to_string();
            self.write(id, Some(record));
        }
    }

    fn deliver(&mut self, i: usize, count: usize) {
        let now = self.now;
        let node = &mut self.replicas[i];
        if !node.running || !node.connected {
            return;
        }
        for _ in 0..count {
            let Some((id, revision, record)) = self.log.get(node.cursor).cloned() else {
                return;
            };
            node.cursor += 1;
            match record {
                Some(r) => {
                    let state = LeaseState::Holding(r);
                    node.replica.observe(&id, &revision.to_string(), state, now)
                }
                None => node.replica.forget(&id),
            }
        }
    }

    fn relist(&mut self, i: usize) {
        let now = self.now;
        let leases = self
            .store
            .iter()
            .map(|(id, (rv, r))| (id.clone(), rv.to_string(), LeaseState::Holding(r.clone())))
            .collect();
        let node = &mut self.replicas[i];
        if !node.running || !node.connected {
            return;
        }
        node.cursor = self.log.len();
        node.replica.relist(leases, now);
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        let now = self.now;
        for node in self.replicas.iter_mut().filter(|n| n.running) {
            node.replica.check_deadline(now);
        }
    }

    fn apply(&mut self, op: &Op) {
        let n = self.replicas.len();
        match *op {
            Op::Step(i) => self.step(i % n),
            Op::Deliver(i, count) => self.deliver(i % n, count),
            Op::Relist(i) => self.relist(i % n),
            Op::Advance(ms) => self.advance(Duration::from_millis(ms)),
            Op::Demand(i, d) => self.replicas[i % n].demand = d,
            Op::Crash(i) => self.replicas[i % n].running = false,
            Op::Stop(i) => {
                let node = &mut self.replicas[i % n];
                if node.running && node.connected {
                    node.running = false;
                    let id = node.replica.id().to_string();
                    self.write(id, None);
                }
            }
            Op::Partition(i) => self.replicas[i % n].connected = false,
            Op::Heal(i) => self.replicas[i % n].connected = true,
        }
    }

    /// The replicas whose limits count against the budget: running and joined.
    fn joined(&self) -> impl Iterator<Item = &Node> {
        self.replicas
            .iter()
            .filter(|n| n.running && n.replica.phase() == Phase::Joined)
    }

    fn check(&self) -> Result<(), TestCaseError> {
        let limits: u64 = self.joined().map(|n| u64::from(n.replica.limit())).sum();
        prop_assert!(
            limits <= u64::from(self.budget),
            "limits {limits} > budget {}",
            self.budget
        );
        let published: u64 = self
            .joined()
            .map(|n| self.store.get(n.replica.id()).map_or(0, |(_, r)| r.share))
            .map(u64::from)
            .sum();
        prop_assert!(
            published <= u64::from(self.budget),
            "published {published} > budget {}",
            self.budget
        );
        for node in self.replicas.iter().filter(|n| n.running) {
            let r = &node.replica;
            if r.phase() == Phase::Joining {
                prop_assert!(!r.is_ready());
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Op {
    Step(usize),
    Deliver(usize, usize),
    Relist(usize),
    Advance(u64),
    Demand(usize, f64),
    Crash(usize),
    Stop(usize),
    Partition(usize),
    Heal(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..8).prop_map(Op::Step),
        8 => (0usize..8, 1usize..6).prop_map(|(i, c)| Op::Deliver(i, c)),
        1 => (0usize..8).prop_map(Op::Relist),
        4 => (1u64..8000).prop_map(Op::Advance),
        3 => (0usize..8, 0.0f64..200.0).prop_map(|(i, d)| Op::Demand(i, d)),
        1 => (0usize..8).prop_map(Op::Crash),
        1 => (0usize..8).prop_map(Op::Stop),
        1 => (0usize..8).prop_map(Op::Partition),
        1 => (0usize..8).prop_map(Op::Heal),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn joined_replicas_never_use_or_publish_more_than_the_budget(
        count in 1usize..5,
        budget in 1u32..80,
        floor in 0u32..8,
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        let mut model = Model::new(count, budget, floor);
        for op in &ops {
            model.apply(op);
            model.check()?;
        }
    }
}

/// Operations that make concurrent raises likely: demand moving, steps, one event at a time.
fn racing_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..3).prop_map(Op::Step),
        6 => (0usize..3).prop_map(|i| Op::Deliver(i, 1)),
        3 => (0usize..3, prop_oneof![Just(0.0), Just(100.0)]).prop_map(|(i, d)| Op::Demand(i, d)),
        1 => (1u64..600).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn concurrent_raises_never_take_more_than_the_budget(
        ops in proptest::collection::vec(racing_op(), 1..400),
    ) {
        let mut model = Model::new(3, 30, 7);
        start(&mut model);
        for op in &ops {
            model.apply(op);
            model.check()?;
        }
    }
}

/// Runs every replica's loop in lockstep: step, deliver everything, a little time.
fn settle(model: &mut Model, rounds: usize) {
    for _ in 0..rounds {
        for i in 0..model.replicas.len() {
            model.step(i);
        }
        for i in 0..model.replicas.len() {
            model.deliver(i, usize::MAX);
        }
        model.advance(Duration::from_millis(500));
    }
}

fn start(model: &mut Model) {
    for i in 0..model.replicas.len() {
        model.relist(i);
    }
}

fn limits(model: &Model) -> Vec<u32> {
    model.replicas.iter().map(|n| n.replica.limit()).collect()
}

#[test]
fn three_idle_replicas_join_and_split_the_budget_evenly() {
    let mut model = Model::new(3, 30, 7);
    start(&mut model);
    settle(&mut model, 6);
    assert!(model.replicas.iter().all(|n| n.replica.is_ready()));
    assert_eq!(limits(&model), vec![10, 10, 10]);
}

#[test]
fn the_share_follows_the_load_from_one_replica_to_another() {
    let mut model = Model::new(3, 30, 7);
    start(&mut model);
    model.replicas[0].demand = 100.0;
    settle(&mut model, 6);
    assert_eq!(limits(&model), vec![16, 7, 7]);
    model.replicas[0].demand = 0.0;
    model.replicas[2].demand = 100.0;
    settle(&mut model, 4);
    assert_eq!(limits(&model), vec![7, 7, 16]);
}

#[test]
fn a_crashed_replicas_share_is_reclaimed_once_its_lease_expires() {
    let mut model = Model::new(3, 30, 7);
    start(&mut model);
    settle(&mut model, 6);
    model.replicas[2].running = false;
    settle(&mut model, 2);
    assert_eq!(
        limits(&model)[..2],
        [10, 10],
        "not before the Lease expires"
    );
    settle(&mut model, 40);
    assert_eq!(limits(&model)[..2], [15, 15]);
}

#[test]
fn a_graceful_stop_hands_its_share_over_at_once() {
    let mut model = Model::new(3, 30, 7);
    start(&mut model);
    settle(&mut model, 6);
    model.apply(&Op::Stop(2));
    settle(&mut model, 4);
    assert_eq!(limits(&model)[..2], [15, 15]);
}

#[test]
fn a_replica_that_cannot_write_falls_back_before_its_peers_reclaim_its_share() {
    let mut model = Model::new(3, 30, 7);
    start(&mut model);
    settle(&mut model, 6);
    model.replicas[1].connected = false;
    // Two thirds of a Lease duration: the partitioned replica has fallen back.
    settle(&mut model, 20);
    assert_eq!(model.replicas[1].replica.phase(), Phase::Fallback);
    assert_eq!(model.replicas[1].replica.limit(), 10, "min(share, 30 / 3)");
    settle(&mut model, 20);
    assert_eq!(limits(&model), vec![15, 10, 15]);
    model.replicas[1].connected = true;
    model.relist(1);
    settle(&mut model, 6);
    assert_eq!(limits(&model), vec![10, 10, 10]);
    assert!(model
        .replicas
        .iter()
        .all(|n| n.replica.phase() == Phase::Joined));
}

#[test]
fn a_replica_that_cannot_reach_the_store_at_start_serves_with_the_default_share() {
    let mut model = Model::new(1, 30, 7);
    model.replicas[0].connected = false;
    let r = &mut model.replicas[0].replica;
    let now = model.now;
    assert!(r.step(now, demand(0.0), 0).is_some());
    assert!(!r.is_ready());
    assert!(r.check_deadline(now + D * 2 / 3));
    assert!(r.is_ready());
    assert_eq!(r.limit(), 10, "30 / 3 start replicas");
}

#[test]
fn an_unreadable_peer_counts_as_holding_the_whole_budget() {
    let s = settings(30, 7);
    let now = Instant::now();
    let mut r = Replica::new("a".into(), s, now);
    r.relist(vec![("b".into(), "1".into(), LeaseState::Unreadable)], now);
    let claimed = r.step(now, demand(50.0), 0).expect("a first record");
    r.written(claimed.clone(), now, true);
    r.observe("a", "2", LeaseState::Holding(claimed), now);
    r.observe("b", "3", LeaseState::Unreadable, now);
    r.step(now, demand(50.0), 0);
    assert_eq!(r.phase(), Phase::Joining, "no room while b may hold it all");
}

#[test]
fn a_demand_that_doubles_is_written_before_the_renewal_but_not_more_than_four_times_a_period() {
    let now = Instant::now();
    let mut r = Replica::new("a".into(), settings(30, 7), now);
    r.relist(Vec::new(), now);
    let first = r.step(now, demand(4.0), 0).expect("the first record");
    r.written(first, now, true);
    let soon = now + Duration::from_millis(100);
    assert_eq!(
        r.step(soon, demand(40.0), 0),
        None,
        "not within a quarter period"
    );
    let later = now + Duration::from_millis(1300);
    let record = r
        .step(later, demand(40.0), 0)
        .expect("written before the renewal");
    assert_eq!(record.demand, 40.0);
    r.written(record, later, true);
    let after = later + Duration::from_millis(1300);
    assert_eq!(r.step(after, demand(45.0), 0), None, "a small change waits");
}
