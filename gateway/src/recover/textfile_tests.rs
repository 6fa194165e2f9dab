use super::*;

fn summary() -> Summary {
    let mut summary = Summary {
        command: "replay",
        read: 9,
        recovered: 3,
        still_failing: 2,
        already_recovered: 1,
        unreadable: vec![("eventgw.dead-letter/0/7".into(), "not_json")],
        filtered_out: 2,
        ..Summary::default()
    };
    summary.recovered_by.insert(("demo".into(), "Lead Status Changed".into()), 2);
    summary.recovered_by.insert(("web \"beta\"".into(), "Page Viewed".into()), 1);
    summary
}

/// The value of the line that starts with `series `.
fn value(text: &str, series: &str) -> String {
    let prefix = format!("{series} ");
    let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{series} in:\n{text}"));
    line[prefix.len()..].to_owned()
}

#[test]
fn every_outcome_is_written_with_the_summarys_count_and_the_last_run() {
    let text = render(&summary(), true, 1_765_000_000.5, "");
    for (outcome, n) in
        [("recovered", 3), ("still_failing", 2), ("already_recovered", 1), ("unreadable", 1), ("filtered_out", 2)]
    {
        assert_eq!(value(&text, &format!("eventgw_recovery_events_total{{outcome=\"{outcome}\"}}")), n.to_string());
        assert_eq!(value(&text, &format!("eventgw_recovery_last_run_events{{outcome=\"{outcome}\"}}")), n.to_string());
    }
    let demo = "eventgw_recovery_recovered_events_total{source=\"demo\",event=\"Lead Status Changed\"}";
    assert_eq!(value(&text, demo), "2");
    let quoted = "eventgw_recovery_recovered_events_total{source=\"web \\\"beta\\\"\",event=\"Page Viewed\"}";
    assert_eq!(value(&text, quoted), "1", "label values escaped");
    assert_eq!(value(&text, "eventgw_recovery_last_run_timestamp_seconds"), "1765000000.500");
    assert_eq!(value(&text, "eventgw_recovery_last_run_success"), "1");
    assert!(text.contains("# TYPE eventgw_recovery_events_total counter\n"), "{text}");
    assert!(text.ends_with('\n'));
}

#[test]
fn counters_add_up_over_runs_and_the_last_run_gauges_do_not() {
    let first = render(&summary(), true, 1.0, "");
    let mut second_run = Summary { command: "replay", still_failing: 2, already_recovered: 3, ..Summary::default() };
    second_run.recovered_by.insert(("other".into(), "Order Completed".into()), 0);
    let second = render(&second_run, false, 2.0, &first);
    assert_eq!(value(&second, "eventgw_recovery_events_total{outcome=\"recovered\"}"), "3");
    assert_eq!(value(&second, "eventgw_recovery_events_total{outcome=\"still_failing\"}"), "4");
    assert_eq!(value(&second, "eventgw_recovery_events_total{outcome=\"already_recovered\"}"), "4");
    assert_eq!(value(&second, "eventgw_recovery_last_run_events{outcome=\"recovered\"}"), "0");
    assert_eq!(value(&second, "eventgw_recovery_last_run_events{outcome=\"already_recovered\"}"), "3");
    let demo = "eventgw_recovery_recovered_events_total{source=\"demo\",event=\"Lead Status Changed\"}";
    assert_eq!(value(&second, demo), "2", "kept from the first run");
    assert_eq!(value(&second, "eventgw_recovery_last_run_success"), "0");
    assert_eq!(second.matches("# TYPE eventgw_recovery_events_total").count(), 1, "{second}");
}

#[test]
fn a_file_that_is_not_ours_starts_the_counters_from_zero() {
    let text = render(&summary(), true, 1.0, "garbage\neventgw_recovery_events_total{outcome=\"recovered\"} x\n");
    assert_eq!(value(&text, "eventgw_recovery_events_total{outcome=\"recovered\"}"), "3");
}

#[test]
fn the_file_is_replaced_whole_and_no_temporary_is_left() {
    let dir = std::env::temp_dir().join(format!("eventgw-textfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("eventgw_recovery.prom");
    write(&path, &summary(), true).expect("written");
    write(&path, &summary(), true).expect("written again");
    let text = std::fs::read_to_string(&path).expect("read");
    assert_eq!(value(&text, "eventgw_recovery_events_total{outcome=\"recovered\"}"), "6");
    let names: Vec<_> = std::fs::read_dir(&dir).expect("dir").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("eventgw_recovery.prom")]);
    std::fs::remove_dir_all(&dir).expect("cleaned");
}
