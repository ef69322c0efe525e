//! `ib_acme --json`: the same conversations as the text runs (same request bytes, same
//! exit status), reported as one JSON document — checked on real captured replies.

mod acme_fake;

use acme_fake::{
    Case, FakeServer, OURS, first_request_difference, load_cases, run_client, temp_dir,
};
use serde_json::Value;
use std::path::Path;

fn case(label: &str) -> Case {
    load_cases("real-ibacm")
        .into_iter()
        .find(|c| c.label == label)
        .unwrap()
}

/// Replays a real capture with `--json` added; returns the document and exit code.
fn json_run(label: &str) -> (Value, i32, String) {
    let case = case(label);
    let dir = temp_dir(&format!("json-{label}"));
    let socket = dir.join("acm.sock");
    let svc = socket.to_str().unwrap().to_owned();
    let mut args: Vec<String> = case
        .args
        .iter()
        .map(|a| a.replace("/tmp/acmproxy.sock", &svc))
        .collect();
    args.push("--json".into());
    let server = FakeServer::start(&socket, case.responses.clone());
    let run = run_client(OURS, &args, &[]);
    let log = server.finish();
    assert_eq!(
        first_request_difference(&case.requests, &log.requests),
        None,
        "{label}"
    );
    assert_eq!(run.code, case.exit, "{label}");
    assert_eq!(run.stderr, "", "{label}");
    let _ = std::fs::remove_dir_all(&dir);
    (serde_json::from_str(&run.stdout).unwrap(), run.code, svc)
}

#[test]
fn combined_resolve_perf_and_endpoints() {
    let (v, code, svc) = json_run("combined_resolve_perf_ep");
    assert_eq!(
        (code, v["status"].as_i64(), v["exit_code"].as_i64()),
        (0, Some(0), Some(0))
    );
    let s = &v["services"][0];
    assert_eq!(s["service"], svc);
    assert_eq!(s["connect_status"], 0);
    assert!(s["error"].is_null());
    let r = &s["resolves"][0];
    assert_eq!(r["destination"], "10.0.0.2");
    assert_eq!(r["source"], "10.0.0.1");
    assert_eq!(r["format"], "ip");
    assert_eq!(
        r["attempts"],
        serde_json::json!([{ "ok": true, "error": null }])
    );
    assert_eq!(r["status"], 0);
    let p = &r["path"];
    assert_eq!(p["dgid"], "fe80::2:c903:a0:b002");
    assert_eq!(p["sgid"], "fe80::2:c903:a0:b001");
    assert_eq!((p["dlid"].as_u64(), p["slid"].as_u64()), (Some(2), Some(1)));
    assert_eq!(p["pkey"], 0xffff);
    assert_eq!(p["reversible"], true);
    assert_eq!(
        (
            p["mtu"].as_u64(),
            p["rate"].as_u64(),
            p["packet_lifetime"].as_u64()
        ),
        (Some(4), Some(3), Some(18))
    );
    assert_eq!(p["lines"][0], "Path information");
    // `-P -e 1`: the shared endpoint index makes the perf query ask for endpoint 1.
    let perf = &s["perf"][0];
    assert_eq!(perf["endpoint"], 1);
    assert_eq!(
        perf["counters"],
        serde_json::json!({
            "error_count": 1, "resolve_count": 18, "no_data": 2, "addr_query_count": 3,
            "addr_cache_count": 3, "route_query_count": 9, "route_cache_count": 8
        })
    );
    let ep = &s["endpoints"][0];
    assert_eq!(ep["guid"], "0x0002c90300a0b000");
    assert_eq!(
        (
            ep["index"].as_i64(),
            ep["port"].as_u64(),
            ep["port_count"].as_u64()
        ),
        (Some(1), Some(1), Some(1))
    );
    assert_eq!(ep["pkey"], 0xffff);
    assert_eq!(ep["provider"], "ibacmp");
    assert_eq!(
        ep["addresses"],
        serde_json::json!(["fakehost", "10.0.0.1", "fd00::1"])
    );
    assert!(s["missing_endpoint"].is_null());
}

#[test]
fn failed_resolve_and_missing_endpoint() {
    let (v, code, _) = json_run("resolve_nosrc_ip");
    assert_eq!(
        (code, v["status"].as_i64(), v["exit_code"].as_i64()),
        (255, Some(-1), Some(255))
    );
    let r = &v["services"][0]["resolves"][0];
    assert_eq!(r["status"], -1);
    assert!(r["path"].is_null());
    let e = &r["attempts"][0]["error"];
    assert_eq!(e["errno"], 99);
    assert_eq!(e["message"], "Cannot assign requested address");
    assert_eq!(
        e["lines"][0],
        "ib_acm_resolve_ip failed: Cannot assign requested address"
    );

    let (v, _, _) = json_run("ep_missing");
    assert_eq!(v["services"][0]["missing_endpoint"], 5);
    assert_eq!(v["services"][0]["endpoints"], serde_json::json!([]));

    let (v, _, _) = json_run("perf_src_unknown");
    let e = &v["services"][0]["perf_error"];
    assert_eq!(e["errno"], 99);
    assert_eq!(e["lines"].as_array().unwrap().len(), 2);

    let (v, _, _) = json_run("resolve_lid_verify");
    assert_eq!(
        v["services"][0]["resolves"][0]["sa_verification"],
        serde_json::json!({ "ok": true, "error": null })
    );
    let (v, _, _) = json_run("resolve_gid_nosrc");
    assert_eq!(v["services"][0]["resolves"][0]["format"], "gid");
    assert!(v["services"][0]["resolves"][0]["source"].is_null());
}

#[test]
fn unreachable_service() {
    let args: Vec<String> = ["-S", "/nonexistent/a[1-2]", "-P", "--json"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let run = run_client(OURS, &args, &[]);
    assert_eq!(run.code, 2);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["services"].as_array().unwrap().len(), 2);
    let s = &v["services"][1];
    assert_eq!(s["service"], "/nonexistent/a2");
    assert_eq!(s["connect_status"], 2);
    assert_eq!(s["error"]["errno"], 2);
    assert_eq!(
        s["error"]["lines"][0],
        "/nonexistent/a2,unable to contact service: No such file or directory"
    );
    assert_eq!(v["status"], 2);
    assert!(Path::new(OURS).exists());
}
