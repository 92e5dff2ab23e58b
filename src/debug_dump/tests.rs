use std::time::{Duration, UNIX_EPOCH};

use tokio::time::Instant;

use super::*;

/// `text` with each tab-terminated cell padded to the given widths (hand-derived expectations).
fn padded(cells: &[(&str, usize)], last: &str) -> String {
    let mut line: String = cells.iter().map(|(c, w)| format!("{c:<w$}")).collect();
    line.push_str(last);
    line.push('\n');
    line
}

#[test]
fn tabwriter_pads_columns_to_the_widest_cell_of_their_block() {
    let cases: &[(&str, &str)] = &[
        // minwidth 8 wins over "a," + 1.
        ("a,\tb\n", "a,      b\n"),
        // The last cell of a line is not in a column and is never padded.
        ("a\tb", "a       b"),
        ("", ""),
        ("no tabs\n", "no tabs\n"),
        // Widths count characters, not bytes.
        ("µs\tx\n", "µs      x\n"),
        // An empty line ends every column block.
        ("abcdefghij\tx\n\nab\tx\n", "abcdefghij x\n\nab      x\n"),
        // A line with fewer cells ends the blocks of the columns it lacks (column 1 here), not
        // of those it has (column 0 spans all three lines: 14 + 1).
        (
            "aaaaaaaaaa\tb\tc\nx\ty\nlong-cell-here\tzzzzzzzzz\tw\n",
            "aaaaaaaaaa     b       c\n\
             x              y\n\
             long-cell-here zzzzzzzzz w\n",
        ),
        // Empty tab-terminated cells are padded too.
        ("\tx\n", "        x\n"),
    ];
    for (input, want) in cases {
        assert_eq!(TabWriter::APF_DEBUG.format(input), *want, "{input:?}");
    }
}

#[test]
fn tabwriter_honours_its_settings() {
    let tw = TabWriter {
        min_width: 0,
        padding: 2,
        pad_char: '.',
    };
    assert_eq!(
        tw.format("a\tbb\tc\nddd\te\tf\n"),
        "a....bb..c\nddd..e...f\n"
    );
}

#[test]
fn priority_levels_are_sorted_by_name_and_aligned() {
    let rows = [
        PriorityLevelRow {
            name: "workload-low".into(),
            active_queues: 1,
            waiting_requests: 2,
            executing_requests: 13,
            dispatched_requests: 1234,
            rejected_requests: 1,
            ..PriorityLevelRow::default()
        },
        PriorityLevelRow {
            name: "catch-all".into(),
            is_idle: true,
            dispatched_requests: 5,
            ..PriorityLevelRow::default()
        },
    ];
    // Widths: each header cell (comma included) + 1, at least 8.
    let w = [19, 14, 8, 13, 17, 19, 20, 18, 18];
    let line = |cells: [&str; 10]| {
        let cols: Vec<(&str, usize)> = cells[..9].iter().copied().zip(w).collect();
        padded(&cols, cells[9])
    };
    let want = [
        line([
            "PriorityLevelName,",
            "ActiveQueues,",
            "IsIdle,",
            "IsQuiescing,",
            "WaitingRequests,",
            "ExecutingRequests,",
            "DispatchedRequests,",
            "RejectedRequests,",
            "TimedoutRequests,",
            "CancelledRequests",
        ]),
        line([
            "catch-all,",
            "0,",
            "true,",
            "false,",
            "0,",
            "0,",
            "5,",
            "0,",
            "0,",
            "0",
        ]),
        line([
            "workload-low,",
            "1,",
            "false,",
            "false,",
            "2,",
            "13,",
            "1234,",
            "1,",
            "0,",
            "0",
        ]),
    ]
    .concat();
    assert_eq!(dump_priority_levels(&rows), want);
    // Spelled out once, to pin the padding arithmetic itself.
    assert!(
        want.starts_with("PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, ")
    );
    assert!(want
        .contains("\ncatch-all,         0,            true,   false,       0,               0,"));
}

#[test]
fn queues_print_r_values_as_seat_seconds() {
    let rows = [QueueRow {
        priority_level: "global-default".into(),
        index: 7,
        pending_requests: 1,
        executing_requests: 2,
        seats_in_use: 2,
        next_dispatch_r: 123_456_789_012,
        initial_seats_sum: 1,
        max_seats_sum: 1,
        total_work_sum: 5_000_000,
    }];
    let w = [19, 8, 17, 19, 12, 17, 17, 13];
    let line = |cells: [&str; 9]| {
        let cols: Vec<(&str, usize)> = cells[..8].iter().copied().zip(w).collect();
        padded(&cols, cells[8])
    };
    let want = [
        line([
            "PriorityLevelName,",
            "Index,",
            "PendingRequests,",
            "ExecutingRequests,",
            "SeatsInUse,",
            "NextDispatchR,",
            "InitialSeatsSum,",
            "MaxSeatsSum,",
            "TotalWorkSum",
        ]),
        line([
            "global-default,",
            "7,",
            "1,",
            "2,",
            "2,",
            "1234.56789012ss,",
            "1,",
            "1,",
            "0.05000000ss",
        ]),
    ]
    .concat();
    assert_eq!(dump_queues(&rows), want);
}

fn request(queue_index: i64, index: i64, start: Option<SystemTime>) -> RequestRow {
    RequestRow {
        priority_level: "workload-low".into(),
        flow_schema: "service-accounts".into(),
        queue_index,
        request_index_in_queue: index,
        flow_distinguisher: "system:serviceaccount:default:builder".into(),
        arrive_time: UNIX_EPOCH + Duration::new(1_700_000_000, 120_000_000),
        initial_seats: 1,
        final_seats: 0,
        additional_latency: Duration::ZERO,
        start_time: start,
        details: None,
    }
}

#[test]
fn requests_without_details_have_ten_columns() {
    let started = UNIX_EPOCH + Duration::from_secs(1_700_000_001);
    let mut executing = request(3, -1, Some(started));
    executing.final_seats = 2;
    executing.additional_latency = Duration::from_millis(5);
    let rows = [request(3, 0, None), executing];
    let arrive = "2023-11-14T22:13:20.12Z,";
    let w = [19, 18, 12, 21, 39, 25, 14, 12, 19];
    let line = |cells: [&str; 10]| {
        let cols: Vec<(&str, usize)> = cells[..9].iter().copied().zip(w).collect();
        padded(&cols, cells[9])
    };
    let (pl, fs, fd) = (
        "workload-low,",
        "service-accounts,",
        "system:serviceaccount:default:builder,",
    );
    let want = [
        line([
            "PriorityLevelName,",
            "FlowSchemaName,",
            "QueueIndex,",
            "RequestIndexInQueue,",
            "FlowDistingsher,",
            "ArriveTime,",
            "InitialSeats,",
            "FinalSeats,",
            "AdditionalLatency,",
            "StartTime",
        ]),
        line([
            pl,
            fs,
            "3,",
            "0,",
            fd,
            arrive,
            "1,",
            "0,",
            "0s,",
            "0001-01-01T00:00:00Z",
        ]),
        line([
            pl,
            fs,
            "3,",
            "-1,",
            fd,
            arrive,
            "1,",
            "2,",
            "5ms,",
            "2023-11-14T22:13:21Z",
        ]),
    ]
    .concat();
    assert_eq!(dump_requests(&rows, false), want);
}

#[test]
fn request_details_add_eight_columns_and_group_version() {
    let mut with = request(-1, -1, Some(UNIX_EPOCH));
    with.details = Some(RequestDetails {
        user_name: "alice".into(),
        request: Arc::new(RequestInfo {
            verb: "list".into(),
            path: "/apis/apps/v1/deployments".into(),
            api_group: "apps".into(),
            api_version: "v1".into(),
            resource: "deployments".into(),
            ..RequestInfo::default()
        }),
    });
    let mut core = request(-1, -1, Some(UNIX_EPOCH));
    core.details = Some(RequestDetails {
        request: Arc::new(RequestInfo {
            api_version: "v1".into(),
            ..RequestInfo::default()
        }),
        ..RequestDetails::default()
    });
    let text = dump_requests(&[with, core, request(0, 0, None)], true);
    // Base columns as in the ten-column test but StartTime (22 wide: a time and a comma); detail
    // widths from the widest of header and cells: "alice," < "UserName,", the path, "apps/v1,"
    // < "APIVersion,", "deployments," > "Resource,".
    let w = [
        19, 18, 12, 21, 39, 25, 14, 12, 19, 22, 10, 8, 27, 11, 8, 12, 13,
    ];
    let line = |cells: [&str; 18]| {
        let cols: Vec<(&str, usize)> = cells[..17].iter().copied().zip(w).collect();
        padded(&cols, cells[17])
    };
    let (pl, fs, fd) = (
        "workload-low,",
        "service-accounts,",
        "system:serviceaccount:default:builder,",
    );
    let (arrive, epoch) = ("2023-11-14T22:13:20.12Z,", "1970-01-01T00:00:00Z,");
    let want = [
        line([
            "PriorityLevelName,",
            "FlowSchemaName,",
            "QueueIndex,",
            "RequestIndexInQueue,",
            "FlowDistingsher,",
            "ArriveTime,",
            "InitialSeats,",
            "FinalSeats,",
            "AdditionalLatency,",
            "StartTime,",
            "UserName,",
            "Verb,",
            "APIPath,",
            "Namespace,",
            "Name,",
            "APIVersion,",
            "Resource,",
            "SubResource",
        ]),
        line([
            pl,
            fs,
            "-1,",
            "-1,",
            fd,
            arrive,
            "1,",
            "0,",
            "0s,",
            epoch,
            "alice,",
            "list,",
            "/apis/apps/v1/deployments,",
            ",",
            ",",
            "apps/v1,",
            "deployments,",
            "",
        ]),
        // The core group prints the bare version.
        line([
            pl, fs, "-1,", "-1,", fd, arrive, "1,", "0,", "0s,", epoch, ",", ",", ",", ",", ",",
            "v1,", ",", "",
        ]),
        // No details: eight empty cells, padded like the others.
        line([
            pl,
            fs,
            "0,",
            "0,",
            fd,
            arrive,
            "1,",
            "0,",
            "0s,",
            "0001-01-01T00:00:00Z,",
            ",",
            ",",
            ",",
            ",",
            ",",
            ",",
            ",",
            "",
        ]),
    ]
    .concat();
    assert_eq!(text, want);
}

/// The probe: `%0A` in a path (decoded to a newline), a tab in a name and an escape sequence in a
/// user name cannot start a row or a column: one header and one row, each control character
/// escaped, ordinary text (backslashes included) kept.
#[test]
fn control_characters_in_cells_never_start_a_row_or_a_column() {
    let mut forged = request(0, 0, None);
    forged.flow_distinguisher = "eve\u{1b}[2J".into();
    forged.details = Some(RequestDetails {
        user_name: "eve\r\u{85}".into(),
        request: Arc::new(RequestInfo {
            verb: "get".into(),
            path: "/api/v1/namespaces/ns/pods/x\nworkload-low,\tfake-row\\".into(),
            api_version: "v1".into(),
            namespace: "ns".into(),
            resource: "pods".into(),
            name: "x\tcolumn\u{7f}".into(),
            ..RequestInfo::default()
        }),
    });
    let text = dump_requests(&[forged], true);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let row = lines[1];
    assert!(
        !row.contains(['\t', '\r', '\u{1b}', '\u{7f}', '\u{85}']),
        "{row}"
    );
    for escaped in [
        r"eve\x1b[2J,",
        r"eve\r\u0085,",
        r"/api/v1/namespaces/ns/pods/x\nworkload-low,\tfake-row\,",
        r"x\tcolumn\x7f,",
    ] {
        assert!(row.contains(escaped), "{escaped} in {row}");
    }
    // As many columns as the header: each cell but the last ends in "," and padding.
    let columns = |line: &str| line.matches(", ").count();
    assert_eq!(columns(row), columns(lines[0]), "{text}");
}

#[test]
fn include_request_details_needs_a_non_empty_first_value() {
    let cases = [
        (None, false),
        (Some(""), false),
        (Some("includeRequestDetails"), false),
        (Some("includeRequestDetails="), false),
        (Some("includeRequestDetails=1"), true),
        (Some("x=y&includeRequestDetails=false"), true),
        (
            Some("includeRequestDetails=&includeRequestDetails=1"),
            false,
        ),
        (Some("includerequestdetails=1"), false),
    ];
    for (query, want) in cases {
        assert_eq!(include_request_details(query), want, "{query:?}");
    }
}

#[test]
fn rfc3339_nano_trims_the_fraction_and_handles_any_date() {
    let cases = [
        (Some(UNIX_EPOCH), "1970-01-01T00:00:00Z"),
        (
            Some(UNIX_EPOCH + Duration::new(951_782_400, 1)),
            "2000-02-29T00:00:00.000000001Z",
        ),
        (
            Some(UNIX_EPOCH + Duration::new(4_102_444_799, 999_999_000)),
            "2099-12-31T23:59:59.999999Z",
        ),
        (
            Some(UNIX_EPOCH - Duration::from_millis(500)),
            "1969-12-31T23:59:59.5Z",
        ),
        (
            Some(UNIX_EPOCH - Duration::from_secs(86_400 * 365)),
            "1969-01-01T00:00:00Z",
        ),
        (None, "0001-01-01T00:00:00Z"),
        // Leap days: 2024 and 2000 are leap years, 1900 and 2100 are not, 1600 is.
        (
            Some(UNIX_EPOCH + Duration::new(1_709_208_000, 100_000_000)),
            "2024-02-29T12:00:00.1Z",
        ),
        (
            Some(UNIX_EPOCH - Duration::from_secs(2_203_891_201)),
            "1900-02-28T23:59:59Z",
        ),
        (
            Some(UNIX_EPOCH - Duration::from_secs(2_203_891_200)),
            "1900-03-01T00:00:00Z",
        ),
        (
            Some(UNIX_EPOCH + Duration::from_secs(4_107_542_399)),
            "2100-02-28T23:59:59Z",
        ),
        (
            Some(UNIX_EPOCH - Duration::from_secs(11_670_998_400)),
            "1600-02-29T00:00:00Z",
        ),
        // Past 32-bit seconds, with a fraction ending in zeros.
        (
            Some(UNIX_EPOCH + Duration::new(2_147_483_648, 120_000)),
            "2038-01-19T03:14:08.00012Z",
        ),
        (
            Some(UNIX_EPOCH - Duration::from_secs(62_135_596_800)),
            "0001-01-01T00:00:00Z",
        ),
        // The last instant of four-digit years; later ones print as it.
        (
            Some(UNIX_EPOCH + Duration::new(253_402_300_799, 999_999_999)),
            "9999-12-31T23:59:59.999999999Z",
        ),
        (
            Some(UNIX_EPOCH + Duration::from_secs(253_402_300_800 * 4)),
            "9999-12-31T23:59:59.999999999Z",
        ),
        (
            Some(UNIX_EPOCH - Duration::from_secs(62_167_219_201)),
            "0000-01-01T00:00:00Z",
        ),
    ];
    for (time, want) in cases {
        assert_eq!(format_rfc3339_nano(time), want, "{time:?}");
    }
}

#[test]
fn seat_seconds_print_as_go_does() {
    assert_eq!(format_seat_seconds(0), "0.00000000ss");
    assert_eq!(format_seat_seconds(150_000_001), "1.50000001ss");
    assert_eq!(seat_seconds_from_f64(1.5), 150_000_000);
    assert_eq!(seat_seconds_from_f64(-3.0), 0);
    assert_eq!(seat_seconds_from_f64(f64::NAN), 0);
}

#[test]
fn wall_clock_maps_instants_around_its_anchor() {
    let now = Instant::now();
    let at = UNIX_EPOCH + Duration::from_secs(1000);
    let clock = WallClock::new(now, at);
    assert_eq!(
        clock.system_time(now + Duration::from_secs(5)),
        at + Duration::from_secs(5)
    );
    assert_eq!(clock.system_time(now), at);
    if let Some(earlier) = now.checked_sub(Duration::from_secs(3)) {
        assert_eq!(clock.system_time(earlier), at - Duration::from_secs(3));
    }
}

mod properties {
    use proptest::prelude::*;

    use super::TabWriter;

    /// Tables of 1–6 rows of the same number of cells (no tabs or newlines in cells).
    fn table() -> impl Strategy<Value = Vec<Vec<String>>> {
        (1usize..6).prop_flat_map(|columns| {
            prop::collection::vec(prop::collection::vec("[a-zµ,:-]{0,12}", columns), 1..6)
        })
    }

    proptest! {
        #[test]
        fn every_row_starts_each_cell_at_the_same_column(rows in table()) {
            let text: String = rows.iter().map(|r| format!("{}\n", r.join(",\t"))).collect();
            let out = TabWriter::APF_DEBUG.format(&text);
            let lines: Vec<&str> = out.lines().collect();
            prop_assert_eq!(lines.len(), rows.len());
            let columns = rows[0].len();
            // Where each cell starts, in characters, recomputed from the cell texts.
            let mut starts: Option<Vec<usize>> = None;
            for (line, row) in lines.iter().zip(&rows) {
                let chars: Vec<char> = line.chars().collect();
                let mut at = 0;
                let mut row_starts = Vec::new();
                for (i, cell) in row.iter().enumerate() {
                    let cell = if i + 1 < columns { format!("{cell},") } else { cell.clone() };
                    row_starts.push(at);
                    let n = cell.chars().count();
                    prop_assert_eq!(chars[at..at + n].iter().collect::<String>(), cell);
                    at += n;
                    if i + 1 < columns {
                        // Padding: at least one space, and at least minwidth in all.
                        let pad = chars[at..].iter().take_while(|c| **c == ' ').count();
                        prop_assert!(pad >= 1 && n + pad >= 8);
                        at += pad;
                    }
                }
                prop_assert_eq!(at, chars.len(), "nothing after the last cell");
                match &starts {
                    None => starts = Some(row_starts),
                    Some(s) => prop_assert_eq!(s, &row_starts),
                }
            }
        }
    }
}
