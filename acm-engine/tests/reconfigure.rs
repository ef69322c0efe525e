//! Transcript tests of [`Input::Reconfigure`], the daemon's SIGHUP reload
//! (acm_engine::config::reload): address-file names added and removed per endpoint
//! without touching the endpoints whose addresses stay (no QP closed or opened, their
//! caches kept), options that can change live applied, the others left running and
//! logged with their file and line.

mod support;

use acm_engine::config::{AddrFile, OptionLines, Options, Reconfig};
use acm_engine::{ConnId, DeviceDesc, Input, PortAttrs};
use std::net::Ipv4Addr;
use support::Node;
use support::fabric::*;
use support::reference;

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// In the reference fabric's hosts preload: resolving it needs only a PathRecord.
const HOST2_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// The reference HCA with partitions 0xffff and 0x8001 on its port.
fn two_partition_device() -> DeviceDesc {
    DeviceDesc {
        ports: vec![PortAttrs {
            pkeys: vec![0xFFFF, 0x8001],
            ..reference::port_attrs()
        }],
        ..reference::device()
    }
}

/// The reference address file plus a name in partition 0x8001.
fn addr_text() -> String {
    format!("{}fakehost-p fakeib0 1 0x8001\n", reference::ADDRS)
}

/// A node with two endpoints: 0xffff (the reference names) and 0x8001 (fakehost-p).
fn started() -> Node {
    let mut config = reference::config();
    let (file, diags) = AddrFile::parse("ibacm_addr.cfg", &addr_text());
    assert!(diags.is_empty(), "{diags:?}");
    config.addr_file = Some(file);
    let mut node = Node::new(config, reference::sa(), reference::route());
    node.input(Input::DeviceAdded(two_partition_device()));
    node.settle();
    node
}

/// A reload with the options file `opts` and the address file `addrs` (`None`: the
/// address file is kept).
fn reload(node: &mut Node, opts: &str, addrs: Option<&str>) {
    let (mut options, diags) = Options::parse("ibacm_opts.cfg", opts);
    assert!(diags.is_empty(), "{diags:?}");
    // The node runs as the reference, with `sm_events` off (`Node::new`); the files
    // reloaded here do not mention it.
    options.sm_events = false;
    let addr_file = addrs.map(|t| {
        let (file, diags) = AddrFile::parse("ibacm_addr.cfg", t);
        assert!(diags.is_empty(), "{diags:?}");
        file
    });
    let r = Reconfig {
        options,
        option_lines: OptionLines::scan("ibacm_opts.cfg", opts),
        addr_file,
    };
    note(node, "reload");
    node.input(Input::Reconfigure(&r));
    node.settle();
}

/// The addresses of the endpoint EP_QUERY lists at `index` (newest endpoint first).
fn addrs_at(node: &mut Node, index: u8) -> Vec<String> {
    query_ep(node, ConnId(9), index, 1)
        .expect("an endpoint at this index")
        .addrs
}

fn path_queries(node: &Node) -> usize {
    sa_sent_attr(node, ATTR_PATH_RECORD).len()
}

#[test]
fn names_added_and_removed_leave_the_other_endpoints_and_their_caches_alone() {
    let mut node = started();
    assert_eq!(addrs_at(&mut node, 1), ["fakehost-p"], "endpoint 0x8001");
    assert_eq!(
        addrs_at(&mut node, 2),
        ["fakehost", "10.0.0.1", "fd00::1"],
        "endpoint 0xffff"
    );
    // A route cached on endpoint 0xffff.
    assert_eq!(
        status(&resolve(&mut node, ConnId(1), A_IP, HOST2_IP)),
        SUCCESS
    );
    let queries = path_queries(&node);
    assert_eq!(queries, 1);

    // fakehost-q joins 0x8001; nothing changes for 0xffff.
    let before = node.transcript.len();
    let added = format!("{}fakehost-q fakeib0 1 0x8001\n", addr_text());
    reload(&mut node, reference::OPTS, Some(&added));
    let after: Vec<&String> = node.transcript[before..].iter().collect();
    assert!(
        !after
            .iter()
            .any(|l| l.contains("open qp") || l.contains("close qp") || l.contains("detach")),
        "no endpoint reopened: {after:#?}"
    );
    assert_eq!(addrs_at(&mut node, 1), ["fakehost-p", "fakehost-q"]);
    assert_eq!(addrs_at(&mut node, 2), ["fakehost", "10.0.0.1", "fd00::1"]);
    node.assert_logged("config: reloaded: 1 addresses added, 0 removed");
    // The route is still cached: no new PathRecord query.
    assert_eq!(
        status(&resolve(&mut node, ConnId(1), A_IP, HOST2_IP)),
        SUCCESS
    );
    assert_eq!(path_queries(&node), queries, "the cache was kept");

    // fd00::1 goes from 0xffff; 0x8001 keeps both names.
    let removed = added.replace("fd00::1          fakeib0  1     default\n", "");
    assert_ne!(removed, added);
    reload(&mut node, reference::OPTS, Some(&removed));
    assert_eq!(addrs_at(&mut node, 1), ["fakehost-p", "fakehost-q"]);
    assert_eq!(addrs_at(&mut node, 2), ["fakehost", "10.0.0.1"]);
    node.assert_logged("config: reloaded: 0 addresses added, 1 removed");
    assert_eq!(
        status(&resolve(&mut node, ConnId(1), A_IP, HOST2_IP)),
        SUCCESS
    );
    assert_eq!(path_queries(&node), queries, "the cache was kept");
}

#[test]
fn lines_for_a_device_port_or_pkey_the_host_lacks_are_logged_with_their_line() {
    let mut node = started();
    let text = format!(
        "{}ghost mlx9_9 1 default\nport2 fakeib0 2 default\nnokey fakeib0 1 0x7777\n",
        addr_text()
    );
    reload(&mut node, reference::OPTS, Some(&text));
    let logs = node.logs.join("\n");
    for want in [
        "config: ibacm_addr.cfg:6: no device mlx9_9; 'ghost' is not used until it appears",
        "config: ibacm_addr.cfg:7: device fakeib0 has no port 2; 'port2' is not used",
        "config: ibacm_addr.cfg:8: port 1 of device fakeib0 has no pkey 0x7777; 'nokey' is not used",
        "config: reloaded: 0 addresses added, 0 removed",
    ] {
        assert!(logs.contains(want), "{want}\n{logs}");
    }
}

#[test]
fn an_endpoint_left_without_names_closes_and_one_given_a_name_opens() {
    let mut node = started();
    // fakehost-p leaves: endpoint 0x8001 has no address left.
    reload(&mut node, reference::OPTS, Some(reference::ADDRS));
    assert!(node.transcript_text().contains("close qp ep 1"));
    assert_eq!(addrs_at(&mut node, 1), ["fakehost", "10.0.0.1", "fd00::1"]);
    assert_eq!(query_ep(&mut node, ConnId(9), 2, 1), Err(EINVAL));
    // And comes back: a new endpoint for 0x8001.
    reload(&mut node, reference::OPTS, Some(&addr_text()));
    assert!(node.transcript_text().contains("open qp ep 2 pkey 0x8001"));
    assert_eq!(addrs_at(&mut node, 1), ["fakehost-p"]);
    assert_eq!(addrs_at(&mut node, 2), ["fakehost", "10.0.0.1", "fd00::1"]);
}

#[test]
fn live_options_apply_and_the_others_are_logged_with_file_and_line() {
    let mut node = started();
    // log_level 2 -> 1, timeout 1000 -> 500, resolve_depth 8 -> 2 (sizes the QPs).
    let opts = reference::OPTS
        .replace("log_level 2", "log_level 1")
        .replace("timeout 1000", "timeout 500")
        + "resolve_depth 2\n";
    let depth_line = opts.lines().count();
    reload(&mut node, &opts, None);
    let logs = node.logs.join("\n");
    assert!(
        logs.contains(&format!(
            "config: ibacm_opts.cfg:{depth_line}: resolve_depth changed from 8 to 2: needs a restart; 8 stays until then"
        )),
        "{logs}"
    );
    assert!(
        logs.contains(
            "config: reloaded: 0 addresses added, 0 removed, log_level 2 -> 1, timeout 1000 -> 500, 1 changed options need a restart"
        ),
        "{logs}"
    );
    // The SA's timeout is the new one.
    let before = node.sa_sent.len();
    assert_eq!(
        status(&resolve(&mut node, ConnId(1), A_IP, HOST2_IP)),
        SUCCESS
    );
    assert!(node.sa_sent.len() > before);
    assert!(
        node.transcript_text().contains("attr 0x0035")
            && node
                .transcript_text()
                .contains("timeout 500 retries 1 method 0x01 attr 0x0035"),
        "the PathRecord query goes out with the new timeout:\n{}",
        node.transcript_text()
    );
    // Level 1: the verbose per-request lines stop.
    let n = node.logs.len();
    assert_eq!(status(&resolve(&mut node, ConnId(2), A_IP, A_IP)), SUCCESS);
    assert!(
        node.logs[n..].is_empty(),
        "no level-2 lines any more: {:#?}",
        &node.logs[n..]
    );
}

#[test]
fn support_ips_in_addr_cfg_turned_off_takes_the_ip_lines_away() {
    let mut node = started();
    let opts = reference::OPTS.replace("support_ips_in_addr_cfg 1", "support_ips_in_addr_cfg 0");
    reload(&mut node, &opts, None);
    assert_eq!(addrs_at(&mut node, 2), ["fakehost"]);
    assert!(
        node.logs.iter().any(|l| l.ends_with(
            "config: reloaded: 0 addresses added, 2 removed, support_ips_in_addr_cfg 1 -> 0"
        )),
        "{:#?}",
        node.logs
    );
}

/// `addr_prot` is live (docs/protocol/ipoib-neigh.md §3): after a reload to
/// `neigh,acm`, a lookup asks the neighbour table first, and the reload's line says so.
#[test]
fn a_reload_changes_the_address_protocols_of_later_lookups() {
    let mut node = started();
    let peer = Ipv4Addr::new(10, 0, 0, 9);
    node.neigh = Box::new(move |_, dest| {
        if dest == std::net::IpAddr::V4(peer) {
            acm_engine::NeighResult::Found {
                qpn: 0x48,
                gid: reference::gid_of_lid(9),
            }
        } else {
            acm_engine::NeighResult::Unreachable
        }
    });
    let opts = reference::OPTS.replace("addr_prot acm", "addr_prot neigh,acm");
    reload(&mut node, &opts, None);
    let logs = node.logs.join("\n");
    assert!(
        logs.contains("addr_prot acm -> neigh,acm") && !logs.contains("need a restart"),
        "{logs}"
    );
    let ud_before = node.ud_sent.len();
    assert_eq!(status(&resolve(&mut node, ConnId(1), A_IP, peer)), SUCCESS);
    assert_eq!(
        node.ud_sent.len(),
        ud_before,
        "no ACM request: the table answered"
    );
    assert!(node.transcript_text().contains("neigh lookup 10.0.0.9"));
}
