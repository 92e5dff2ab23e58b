//! The `/debug/api_priority_and_fairness/*` dumps of a running proxy, and `/readyz`.

use super::*;

const DEBUG: &str = "/debug/api_priority_and_fairness";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_dumps_show_every_level_queue_and_request() {
    let world = Arc::new(World::start(10, &[]).await);
    let first = world.spawn_get("/hang");
    world.until_tight(0, 1).await;
    let second = world.spawn_get("/hang");
    world.until_tight(1, 1).await;

    let (status, levels) = world.admin(&format!("{DEBUG}/dump_priority_levels")).await;
    assert_eq!(status, StatusCode::OK);
    let levels = rows(&levels);
    assert_eq!(
        levels[0],
        "PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, \
         ExecutingRequests, DispatchedRequests, RejectedRequests, TimedoutRequests, \
         CancelledRequests"
    );
    // catch-all, exempt (mandatory) and tight, by name.
    let names: Vec<&str> = levels[1..]
        .iter()
        .map(|r| r.split(',').next().unwrap_or(""))
        .collect();
    assert_eq!(names, ["catch-all", "exempt", "tight"]);
    assert_eq!(levels[3], "tight, 1, false, false, 1, 1, 1, 0, 0, 0");

    let (_, queues) = world.admin(&format!("{DEBUG}/dump_queues")).await;
    let queues = rows(&queues);
    assert_eq!(
        queues[0],
        "PriorityLevelName, Index, PendingRequests, ExecutingRequests, SeatsInUse, \
         NextDispatchR, InitialSeatsSum, MaxSeatsSum, TotalWorkSum"
    );
    let tight: Vec<&String> = queues.iter().filter(|r| r.starts_with("tight,")).collect();
    assert_eq!(tight.len(), 1, "one row per queue: {queues:?}");
    assert!(tight[0].starts_with("tight, 0, 1, 1, 1, "), "{}", tight[0]);
    assert_eq!(
        queues.len(),
        2,
        "catch-all rejects and exempt is exempt: no queues"
    );

    let (_, requests) = world
        .admin(&format!("{DEBUG}/dump_requests?includeRequestDetails=1"))
        .await;
    let requests = rows(&requests);
    assert_eq!(
        requests[0],
        "PriorityLevelName, FlowSchemaName, QueueIndex, RequestIndexInQueue, FlowDistingsher, \
         ArriveTime, InitialSeats, FinalSeats, AdditionalLatency, StartTime, UserName, Verb, \
         APIPath, Namespace, Name, APIVersion, Resource, SubResource"
    );
    assert_eq!(requests.len(), 3, "one row per request: {requests:?}");
    let cells = |row: &str| row.split(", ").map(str::to_owned).collect::<Vec<_>>();
    let (waiting, executing) = (cells(&requests[1]), cells(&requests[2]));
    assert_eq!(waiting[..4], ["tight", "tight-fs", "0", "0"]);
    assert_eq!(
        waiting[4], "",
        "one queue: no distinguisher, as in the apiserver"
    );
    assert_eq!(
        waiting[9], "0001-01-01T00:00:00Z",
        "a waiting request has not started"
    );
    assert_eq!(waiting[10..13], ["system:anonymous", "get", "/hang"]);
    assert_eq!(executing[..4], ["tight", "tight-fs", "0", "-1"]);
    assert_ne!(executing[9], "0001-01-01T00:00:00Z");

    let (_, plain) = world.admin(&format!("{DEBUG}/dump_requests")).await;
    assert_eq!(
        cells(&rows(&plain)[0]).len(),
        10,
        "no detail columns unless asked"
    );
    let (status, _) = world.admin(&format!("{DEBUG}/dump_nothing")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    world.release_hanging(2).await;
    assert_eq!(first.await.expect("first").0, StatusCode::OK);
    assert_eq!(second.await.expect("second").0, StatusCode::OK);
}
