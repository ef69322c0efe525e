//! The emulated libibverbs as a C provider or program sees it, in a child process of
//! this test preloaded with the library and attached to a hub as `node2` of the demo
//! fabric: the device list, both `ibv_query_port` paths (the compat symbol, which
//! rdma-sys 0.3 always takes, and the extended context's op), the UD QP state machine
//! with its attribute masks, and one MAD from one QP to another through the hub,
//! while a second thread waits in `ibv_get_cq_event` on the blocking completion
//! channel, as a provider's thread does.

use acm_io_sim::FabricSpec;
use acm_io_sim::hub::Hub;
use acm_proto::grh::GRH_LEN;
use acm_proto::mad::MAD_LEN;
use rdma_sys::{
    ___ibv_query_port, ibv_ack_cq_events, ibv_ah_attr, ibv_alloc_pd, ibv_attach_mcast,
    ibv_close_device, ibv_comp_channel, ibv_context, ibv_cq, ibv_create_ah,
    ibv_create_comp_channel, ibv_create_cq, ibv_create_qp, ibv_dealloc_pd, ibv_dereg_mr,
    ibv_destroy_ah, ibv_destroy_comp_channel, ibv_destroy_cq, ibv_destroy_qp, ibv_get_async_event,
    ibv_get_cq_event, ibv_get_device_guid, ibv_get_device_list, ibv_get_device_name, ibv_gid,
    ibv_mr, ibv_open_device, ibv_pd, ibv_poll_cq, ibv_port_attr, ibv_post_recv, ibv_post_send,
    ibv_qp, ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_cap, ibv_qp_init_attr, ibv_qp_state, ibv_qp_type,
    ibv_recv_wr, ibv_reg_mr, ibv_req_notify_cq, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wc,
    ibv_wc_flags, ibv_wc_opcode, ibv_wc_status, ibv_wr_opcode, verbs_context,
};
use std::ffi::CStr;
use std::mem::{MaybeUninit, offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// A UD receive as the HCA writes it: the GRH, then the MAD.
const RECV_LEN: usize = GRH_LEN + MAD_LEN;

/// Set in the child process.
const CHILD_ENV: &str = "ACM_FAKE_HCA_TEST_CHILD";
const QKEY: u32 = 0x8001_0000;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the library with the running cargo, in the profile of this test, and says
/// where it is.
fn library() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace())
        .args(["build", "-q", "-p", "acm-fake-hca", "--lib"])
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit());
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("cargo runs");
    assert!(out.status.success(), "cargo build -p acm-fake-hca failed");
    String::from_utf8_lossy(&out.stdout)
        .split('"')
        .find(|s| s.starts_with('/') && s.ends_with("/libacm_fake_hca.so"))
        .map(PathBuf::from)
        .expect("cargo reports the library")
}

#[test]
fn a_verbs_program_talks_to_itself_through_the_hub() {
    if std::env::var_os(CHILD_ENV).is_some() {
        // SAFETY: this process runs with the emulated HCA preloaded.
        unsafe { child() };
        return;
    }
    let dir = std::env::temp_dir().join(format!("acm-fake-hca-verbs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let text = std::fs::read_to_string(workspace().join("testdata/fabrics/demo.toml"))
        .expect("demo fabric");
    let hub_path = dir.join("hub.sock");
    let mut hub = Hub::bind(FabricSpec::parse(&text).expect("valid"), &hub_path).expect("hub");
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let served = std::thread::spawn(move || hub.serve_until(&s).map_err(|e| e.to_string()));
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "a_verbs_program_talks_to_itself_through_the_hub",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, "1")
        .env("LD_PRELOAD", library())
        .env("ACM_FAKE_HCA_HUB", &hub_path)
        .env("ACM_FAKE_HCA_HOST", "node2")
        .output()
        .expect("the child runs");
    stop.store(true, Ordering::Relaxed);
    served.join().expect("hub thread").expect("the hub served");
    let _ = std::fs::remove_dir_all(&dir);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the child ran the test:\n{text}");
}

/// A zeroed C structure (every one used here is plain data).
fn zeroed<T>() -> T {
    // SAFETY: only instantiated with verbs structures, for which all zeroes is valid.
    unsafe { MaybeUninit::zeroed().assume_init() }
}

unsafe fn modify(qp: *mut ibv_qp, attr: &mut ibv_qp_attr, mask: ibv_qp_attr_mask) -> i32 {
    // SAFETY: the caller's live QP; `attr` is a valid attribute structure.
    unsafe { rdma_sys::ibv_modify_qp(qp, attr, mask.0 as i32) }
}

unsafe fn ud_qp(pd: *mut ibv_pd, cq: *mut ibv_cq) -> *mut ibv_qp {
    let mut init = ibv_qp_init_attr {
        qp_context: std::ptr::null_mut(),
        send_cq: cq,
        recv_cq: cq,
        srq: std::ptr::null_mut(),
        cap: ibv_qp_cap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: ibv_qp_type::IBV_QPT_UD,
        sq_sig_all: 0,
    };
    // SAFETY: live PD and CQ, valid attributes.
    let qp = unsafe { ibv_create_qp(pd, &mut init) };
    assert!(!qp.is_null(), "ibv_create_qp");
    qp
}

/// RESET → INIT → RTR → RTS, checking the masks on the way.
unsafe fn to_rts(qp: *mut ibv_qp) {
    use ibv_qp_attr_mask as m;
    let mut a: ibv_qp_attr = zeroed();
    // SAFETY: every call below is on the live QP and a valid attribute structure.
    unsafe {
        a.qp_state = ibv_qp_state::IBV_QPS_RTR;
        assert_eq!(
            modify(qp, &mut a, m::IBV_QP_STATE),
            libc::EINVAL,
            "RESET→RTR"
        );
        a.qp_state = ibv_qp_state::IBV_QPS_INIT;
        a.port_num = 1;
        a.pkey_index = 0;
        a.qkey = QKEY;
        let no_qkey = m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT;
        assert_eq!(
            modify(qp, &mut a, no_qkey),
            libc::EINVAL,
            "INIT needs the Q_Key"
        );
        a.port_num = 2;
        let all = no_qkey | m::IBV_QP_QKEY;
        assert_eq!(modify(qp, &mut a, all), libc::EINVAL, "node2 has no port 2");
        a.port_num = 1;
        assert_eq!(modify(qp, &mut a, all), 0, "INIT");
        assert_eq!((*qp).state, ibv_qp_state::IBV_QPS_INIT);
        a.qp_state = ibv_qp_state::IBV_QPS_RTR;
        assert_eq!(modify(qp, &mut a, m::IBV_QP_STATE), 0, "RTR");
        a.qp_state = ibv_qp_state::IBV_QPS_RTS;
        assert_eq!(
            modify(qp, &mut a, m::IBV_QP_STATE),
            libc::EINVAL,
            "RTS needs SQ_PSN"
        );
        assert_eq!(
            modify(qp, &mut a, m::IBV_QP_STATE | m::IBV_QP_SQ_PSN),
            0,
            "RTS"
        );
    }
}

/// Every completion of `cq`, waiting on `channel` (blocking) until there are `n`.
unsafe fn completions(cq: *mut ibv_cq, channel: *mut ibv_comp_channel, n: usize) -> Vec<ibv_wc> {
    let mut got = Vec::new();
    // SAFETY: every call below is on the live CQ and channel; `wc` has room for one entry.
    unsafe {
        loop {
            assert_eq!(ibv_req_notify_cq(cq, 0), 0);
            loop {
                let mut wc: ibv_wc = zeroed();
                if ibv_poll_cq(cq, 1, &mut wc) != 1 {
                    break;
                }
                got.push(wc);
            }
            if got.len() >= n {
                return got;
            }
            let (mut c, mut ctx) = (std::ptr::null_mut(), std::ptr::null_mut());
            assert_eq!(ibv_get_cq_event(channel, &mut c, &mut ctx), 0);
            ibv_ack_cq_events(c, 1);
        }
    }
}

/// The child: everything through the preloaded library.
unsafe fn child() {
    // SAFETY: the whole body makes verbs calls on the objects created here, each with the
    // structures and buffers its contract asks for, released in reverse order.
    unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        assert_eq!(n, 1);
        let dev = *list;
        assert_eq!(
            CStr::from_ptr(ibv_get_device_name(dev)).to_str(),
            Ok("mlx5_0")
        );
        assert_eq!(
            u64::from_be(ibv_get_device_guid(dev)),
            0x0002_c903_00a0_b001
        );
        let ctx: *mut ibv_context = ibv_open_device(dev);
        assert!(!ctx.is_null());

        // The compat path (what rdma-sys 0.3's inline wrapper takes) and the
        // extended context's op give the same port.
        let mut compat: ibv_port_attr = zeroed();
        assert_eq!(___ibv_query_port(ctx, 1, &mut compat), 0);
        assert_eq!((compat.state, compat.lid, compat.sm_lid), (4, 2, 1));
        assert_eq!((compat.active_width, compat.active_speed), (2, 1));
        assert_eq!(compat.link_layer, 1);
        assert_eq!(
            (*ctx).abi_compat as usize,
            usize::MAX,
            "an extended context"
        );
        let vctx = ctx
            .cast::<u8>()
            .sub(offset_of!(verbs_context, context))
            .cast::<verbs_context>();
        assert_eq!((*vctx).sz, size_of::<verbs_context>());
        let mut ext: ibv_port_attr = zeroed();
        let q = (*vctx).query_port.expect("query_port op");
        assert_eq!(q(ctx, 1, &mut ext, size_of::<ibv_port_attr>()), 0);
        assert_eq!((ext.lid, ext.state, ext.pkey_tbl_len), (2, 4, 1));
        assert_eq!(ext.port_cap_flags2, compat.port_cap_flags2);

        let pd = ibv_alloc_pd(ctx);
        let channel = ibv_create_comp_channel(ctx);
        let cq = ibv_create_cq(ctx, 8, 0x77 as *mut _, channel, 0);
        assert!(!pd.is_null() && !channel.is_null() && !cq.is_null());
        let mut buf = vec![0u8; RECV_LEN + MAD_LEN].into_boxed_slice();
        let mr: *mut ibv_mr = ibv_reg_mr(pd, buf.as_mut_ptr().cast(), buf.len(), 1);
        assert!(!mr.is_null());
        let (a, b) = (ud_qp(pd, cq), ud_qp(pd, cq));
        assert_ne!((*a).qp_num, (*b).qp_num);
        to_rts(a);
        to_rts(b);

        let unicast = ibv_gid {
            raw: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        };
        assert_eq!(ibv_attach_mcast(a, &unicast, 0xC001), libc::EINVAL);

        let mut rsge = ibv_sge {
            addr: buf.as_ptr() as u64,
            length: RECV_LEN as u32,
            lkey: (*mr).lkey,
        };
        let mut rwr = ibv_recv_wr {
            wr_id: 5,
            next: std::ptr::null_mut(),
            sg_list: &mut rsge,
            num_sge: 1,
        };
        let mut bad_r = std::ptr::null_mut();
        assert_eq!(ibv_post_recv(a, &mut rwr, &mut bad_r), 0);
        assert_eq!(ibv_req_notify_cq(cq, 0), 0);

        // A provider-style thread blocks on the channel until the receive lands.
        let (tx, rx) = mpsc::channel();
        let ch = channel as usize;
        let waiter = std::thread::spawn(move || {
            let (mut c, mut cq_ctx) = (std::ptr::null_mut(), std::ptr::null_mut());
            let r = ibv_get_cq_event(ch as *mut ibv_comp_channel, &mut c, &mut cq_ctx);
            let _ = tx.send((r, c as usize, cq_ctx as usize));
        });

        for (i, x) in buf[RECV_LEN..].iter_mut().enumerate() {
            *x = i as u8;
        }
        let mut ah_attr: ibv_ah_attr = zeroed();
        ah_attr.dlid = 2;
        ah_attr.port_num = 1;
        let ah = ibv_create_ah(pd, &mut ah_attr);
        assert!(!ah.is_null());
        let mut ssge = ibv_sge {
            addr: buf[RECV_LEN..].as_ptr() as u64,
            length: MAD_LEN as u32,
            lkey: (*mr).lkey,
        };
        let mut swr: ibv_send_wr = zeroed();
        swr.wr_id = 9;
        swr.sg_list = &mut ssge;
        swr.num_sge = 1;
        swr.opcode = ibv_wr_opcode::IBV_WR_SEND;
        swr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
        swr.wr.ud = rdma_sys::ud_t {
            ah,
            remote_qpn: (*a).qp_num,
            remote_qkey: QKEY,
        };
        let mut bad_s = std::ptr::null_mut();
        assert_eq!(ibv_post_send(b, &mut swr, &mut bad_s), 0);

        let (r, c, cq_ctx) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiting thread got the CQ event");
        waiter.join().expect("waiter");
        assert_eq!((r, c, cq_ctx), (0, cq as usize, 0x77));
        ibv_ack_cq_events(cq, 1);

        let wcs = completions(cq, channel, 2);
        let recv = wcs.iter().find(|w| w.wr_id == 5).expect("the receive");
        let send = wcs.iter().find(|w| w.wr_id == 9).expect("the send");
        assert_eq!(
            (send.status, send.opcode),
            (ibv_wc_status::IBV_WC_SUCCESS, ibv_wc_opcode::IBV_WC_SEND)
        );
        assert_eq!(
            (recv.status, recv.opcode, recv.byte_len),
            (
                ibv_wc_status::IBV_WC_SUCCESS,
                ibv_wc_opcode::IBV_WC_RECV,
                RECV_LEN as u32
            )
        );
        assert_eq!(
            (recv.src_qp, recv.slid, recv.qp_num),
            ((*b).qp_num, 2, (*a).qp_num)
        );
        assert_ne!(
            recv.wc_flags & ibv_wc_flags::IBV_WC_GRH.0,
            0,
            "a GRH precedes it"
        );
        assert_eq!(
            &buf[GRH_LEN..RECV_LEN],
            &buf[RECV_LEN..],
            "the MAD arrived after the GRH"
        );

        // Nothing is queued on the async descriptor: a non-blocking read says so.
        let fd = (*ctx).async_fd;
        libc::fcntl(
            fd,
            libc::F_SETFL,
            libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
        );
        let mut ev = MaybeUninit::zeroed();
        assert_eq!(ibv_get_async_event(ctx, ev.as_mut_ptr()), -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN)
        );

        assert_eq!(ibv_destroy_cq(cq), libc::EBUSY, "QPs still use it");
        assert_eq!(ibv_destroy_ah(ah), 0);
        assert_eq!(ibv_destroy_qp(a), 0);
        assert_eq!(ibv_destroy_qp(b), 0);
        assert_eq!(
            ibv_destroy_comp_channel(channel),
            libc::EBUSY,
            "the CQ uses it"
        );
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_destroy_comp_channel(channel), 0);
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}
