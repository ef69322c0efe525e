//! One endpoint's UD queue pair: its CQ on the device's completion channel, one
//! registered buffer holding `recv_depth` 296-byte receive slots (a 40-byte GRH, then
//! the MAD) and the 256-byte send slots, and an address handle per send in flight.
//!
//! Receives are re-posted as soon as the completion has been handed to the caller;
//! each send's address handle is destroyed when its completion arrives, as the
//! reference does for unicast responses. Nothing is retried here.

use super::device::{DeviceInner, VerbsDevice};
use super::error::{VerbsError, call_error, check_call};
use crate::av::UdAddress;
use acm_proto::Gid;
pub use acm_proto::grh::GRH_LEN;
use acm_proto::mad::MAD_LEN;
use rdma_sys::{
    ibv_access_flags, ibv_ah, ibv_attach_mcast, ibv_cq, ibv_create_ah, ibv_create_cq,
    ibv_create_qp, ibv_dereg_mr, ibv_destroy_ah, ibv_destroy_cq, ibv_destroy_qp, ibv_detach_mcast,
    ibv_gid, ibv_modify_qp, ibv_mr, ibv_poll_cq, ibv_post_recv, ibv_post_send, ibv_qp, ibv_qp_attr,
    ibv_qp_attr_mask, ibv_qp_cap, ibv_qp_init_attr, ibv_qp_state, ibv_qp_type, ibv_recv_wr,
    ibv_reg_mr, ibv_req_notify_cq, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wc, ibv_wc_flags,
    ibv_wc_opcode, ibv_wc_status, ibv_wr_opcode,
};
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::rc::Rc;

/// The C type of `ibv_attach_mcast` and `ibv_detach_mcast`.
type McastFn = unsafe extern "C" fn(*mut ibv_qp, *const ibv_gid, u16) -> std::ffi::c_int;

/// Bytes of a send (one MAD).
pub const SEND_LEN: usize = MAD_LEN;
/// Bytes of a receive slot: the GRH the HCA writes, then the MAD.
pub const RECV_LEN: usize = GRH_LEN + MAD_LEN;
/// Send work requests carry this bit in their id; receives carry their slot index.
const SEND_BIT: u64 = 1 << 63;
/// Completions taken per `ibv_poll_cq` call.
const POLL_BATCH: usize = 16;

/// How to open an endpoint's QP.
#[derive(Debug, Clone, Copy)]
pub struct UdConfig {
    /// The port (from 1).
    pub port_num: u8,
    /// The pkey index to use.
    pub pkey_index: u16,
    /// The Q_Key (ACM: 0x80010000).
    pub qkey: u32,
    /// Receive slots to post.
    pub recv_depth: u32,
    /// Sends that may be in flight at once.
    pub send_depth: u32,
    /// Reported by [`VerbsDevice::next_completion_event`] for this endpoint's CQ.
    pub key: u64,
}

/// Work-completion data of a receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvMeta {
    /// The sender's LID.
    pub slid: u16,
    /// The sender's QPN.
    pub src_qp: u32,
    /// The destination LID's path bits.
    pub dlid_path_bits: u8,
    /// The pkey index it arrived on.
    pub pkey_index: u16,
    /// The service level.
    pub sl: u8,
}

/// One completion.
#[derive(Debug)]
pub enum Completion<'a> {
    /// A MAD arrived.
    Recv {
        /// Work-completion data.
        meta: RecvMeta,
        /// The GRH, when the completion says one was present.
        grh: Option<&'a [u8]>,
        /// The MAD.
        mad: &'a [u8],
    },
    /// A send finished.
    Send {
        /// The token it was posted with.
        token: u64,
        /// Whether it succeeded.
        ok: bool,
    },
}

struct SendSlot {
    token: u64,
    ah: NonNull<ibv_ah>,
}

/// A UD queue pair in RTS with its receives posted.
pub struct UdEndpoint {
    dev: Rc<DeviceInner>,
    cq: NonNull<ibv_cq>,
    qp: NonNull<ibv_qp>,
    mr: NonNull<ibv_mr>,
    /// Receive slots, then send slots; registered as `mr`, never moved or resized.
    buf: Box<[u8]>,
    recv_depth: usize,
    sends: Vec<Option<SendSlot>>,
    free_sends: Vec<usize>,
    port_num: u8,
    qpn: u32,
}

impl std::fmt::Debug for UdEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdEndpoint")
            .field("device", &self.dev.name)
            .field("port", &self.port_num)
            .field("qpn", &self.qpn)
            .finish_non_exhaustive()
    }
}

/// Releases what a half-built endpoint holds, in reverse order.
struct Partial {
    cq: Option<NonNull<ibv_cq>>,
    mr: Option<NonNull<ibv_mr>>,
    qp: Option<NonNull<ibv_qp>>,
}

impl Drop for Partial {
    fn drop(&mut self) {
        // SAFETY: each handle was created by this constructor, is used by nothing
        // else, and is released once, QP first.
        unsafe {
            if let Some(qp) = self.qp {
                ibv_destroy_qp(qp.as_ptr());
            }
            if let Some(mr) = self.mr {
                ibv_dereg_mr(mr.as_ptr());
            }
            if let Some(cq) = self.cq {
                ibv_destroy_cq(cq.as_ptr());
            }
        }
    }
}

impl UdEndpoint {
    /// Creates the CQ, registers the buffers, creates the UD QP, moves it to RTS with
    /// `cfg`'s pkey index and Q_Key, posts every receive and arms the CQ.
    ///
    /// # Errors
    /// A verbs call failed; everything created so far is released.
    pub fn open(device: &VerbsDevice, cfg: UdConfig) -> Result<Self, VerbsError> {
        let dev = Rc::clone(&device.inner);
        let name = dev.name.clone();
        let recv_depth = cfg.recv_depth as usize;
        let send_depth = cfg.send_depth.max(1) as usize;
        let cqe = i32::try_from(recv_depth + send_depth).unwrap_or(i32::MAX);
        let mut partial = Partial {
            cq: None,
            mr: None,
            qp: None,
        };
        // SAFETY: the context and channel are alive (held by `dev`); the CQ context
        // is an opaque number handed back by completion events.
        let cq = unsafe {
            ibv_create_cq(
                dev.ctx.as_ptr(),
                cqe,
                cfg.key as *mut libc::c_void,
                dev.channel.as_ptr(),
                0,
            )
        };
        let cq = NonNull::new(cq).ok_or_else(|| call_error(&name, "ibv_create_cq", -1))?;
        partial.cq = Some(cq);
        let mut buf = vec![0u8; recv_depth * RECV_LEN + send_depth * SEND_LEN].into_boxed_slice();
        // SAFETY: the PD is alive; `buf` is a live heap allocation of the given length
        // that is never moved or resized while registered (the MR is deregistered in
        // `Drop` before the buffer is freed).
        let mr = unsafe {
            ibv_reg_mr(
                dev.pd.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32,
            )
        };
        let mr = NonNull::new(mr).ok_or_else(|| call_error(&name, "ibv_reg_mr", -1))?;
        partial.mr = Some(mr);
        let mut init = ibv_qp_init_attr {
            // Handed back by the QP's async events, as the CQ's is by completions.
            qp_context: cfg.key as *mut libc::c_void,
            send_cq: cq.as_ptr(),
            recv_cq: cq.as_ptr(),
            srq: std::ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: send_depth as u32,
                max_recv_wr: recv_depth as u32,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: ibv_qp_type::IBV_QPT_UD,
            sq_sig_all: 0,
        };
        // SAFETY: the PD and CQ are alive and `init` is a valid attribute structure.
        let qp = unsafe { ibv_create_qp(dev.pd.as_ptr(), &mut init) };
        let qp = NonNull::new(qp).ok_or_else(|| call_error(&name, "ibv_create_qp", -1))?;
        partial.qp = Some(qp);
        to_rts(qp, &cfg).map_err(|(call, r)| call_error(&name, call, r))?;
        // SAFETY: `qp` is a live QP.
        let qpn = unsafe { (*qp.as_ptr()).qp_num };
        std::mem::forget(partial);
        let mut ep = Self {
            dev,
            cq,
            qp,
            mr,
            buf,
            recv_depth,
            sends: (0..send_depth).map(|_| None).collect(),
            free_sends: (0..send_depth).rev().collect(),
            port_num: cfg.port_num,
            qpn,
        };
        for slot in 0..recv_depth {
            ep.post_recv(slot)?;
        }
        ep.arm()?;
        Ok(ep)
    }

    /// The QP number.
    #[must_use]
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    fn lkey(&self) -> u32 {
        // SAFETY: the MR is alive while `self` is.
        unsafe { (*self.mr.as_ptr()).lkey }
    }

    fn post_recv(&mut self, slot: usize) -> Result<(), VerbsError> {
        let mut sge = ibv_sge {
            addr: self.buf[slot * RECV_LEN..].as_ptr() as u64,
            length: RECV_LEN as u32,
            lkey: self.lkey(),
        };
        let mut wr = ibv_recv_wr {
            wr_id: slot as u64,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is alive; the SGE points into the registered buffer, inside
        // receive slot `slot`, which no other posted work request uses.
        let r = unsafe { ibv_post_recv(self.qp.as_ptr(), &mut wr, &mut bad) };
        check_call(&self.dev.name, "ibv_post_recv", r)
    }

    fn arm(&self) -> Result<(), VerbsError> {
        // SAFETY: the CQ is alive.
        let r = unsafe { ibv_req_notify_cq(self.cq.as_ptr(), 0) };
        check_call(&self.dev.name, "ibv_req_notify_cq", r)
    }

    /// Posts one MAD (at most 256 bytes) to `dest`, signalled; its completion comes
    /// back from [`UdEndpoint::poll`] with `token`.
    ///
    /// # Errors
    /// Every send slot is in use, or the address handle or post failed.
    pub fn post_send(
        &mut self,
        token: u64,
        dest: &UdAddress,
        mad: &[u8],
    ) -> Result<(), VerbsError> {
        let Some(slot) = self.free_sends.pop() else {
            return Err(VerbsError::SendQueueFull {
                device: self.dev.name.clone(),
                qpn: self.qpn,
                slots: self.sends.len(),
            });
        };
        let len = mad.len().min(SEND_LEN);
        let at = self.recv_depth * RECV_LEN + slot * SEND_LEN;
        self.buf[at..at + len].copy_from_slice(&mad[..len]);
        let mut attr = dest.ah_attr();
        attr.port_num = self.port_num;
        // SAFETY: the PD is alive and `attr` is a valid attribute structure.
        let Some(ah) = NonNull::new(unsafe { ibv_create_ah(self.dev.pd.as_ptr(), &mut attr) })
        else {
            self.free_sends.push(slot);
            return Err(call_error(&self.dev.name, "ibv_create_ah", -1));
        };
        let mut sge = ibv_sge {
            addr: self.buf[at..].as_ptr() as u64,
            length: len as u32,
            lkey: self.lkey(),
        };
        // SAFETY: an all-zero work request is a valid starting point (null pointers,
        // zero counts); the fields a UD send needs are set below.
        let mut wr: ibv_send_wr = unsafe { MaybeUninit::zeroed().assume_init() };
        wr.wr_id = SEND_BIT | slot as u64;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
        wr.wr.ud = rdma_sys::ud_t {
            ah: ah.as_ptr(),
            remote_qpn: dest.remote_qpn,
            remote_qkey: dest.remote_qkey,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP and AH are alive; the SGE points into send slot `slot` of the
        // registered buffer, which stays untouched until the completion frees it.
        let r = unsafe { ibv_post_send(self.qp.as_ptr(), &mut wr, &mut bad) };
        if r != 0 {
            // SAFETY: the AH was created above and the failed post does not use it.
            unsafe { ibv_destroy_ah(ah.as_ptr()) };
            self.free_sends.push(slot);
            return Err(call_error(&self.dev.name, "ibv_post_send", r));
        }
        self.sends[slot] = Some(SendSlot { token, ah });
        Ok(())
    }

    /// Attaches the QP to a multicast group.
    ///
    /// # Errors
    /// The attach failed.
    pub fn attach_mcast(&mut self, mgid: &Gid, mlid: u16) -> Result<(), VerbsError> {
        self.mcast(ibv_attach_mcast, "ibv_attach_mcast", mgid, mlid)
    }

    /// Detaches the QP from a multicast group.
    ///
    /// # Errors
    /// The detach failed.
    pub fn detach_mcast(&mut self, mgid: &Gid, mlid: u16) -> Result<(), VerbsError> {
        self.mcast(ibv_detach_mcast, "ibv_detach_mcast", mgid, mlid)
    }

    /// `ibv_attach_mcast` or `ibv_detach_mcast` (`call`, named `name`) of this QP and
    /// group `mgid`, whose LID is `mlid`.
    fn mcast(
        &mut self,
        call: McastFn,
        name: &'static str,
        mgid: &Gid,
        mlid: u16,
    ) -> Result<(), VerbsError> {
        let gid = ibv_gid { raw: mgid.0 };
        // SAFETY: the QP is alive and `gid` is a valid GID; `call` is one of the two
        // multicast calls, which take exactly these.
        let r = unsafe { call(self.qp.as_ptr(), &gid, mlid) };
        check_call(&self.dev.name, name, r)
    }

    /// Re-arms the CQ, then hands every queued completion to `f`: receives that
    /// succeeded (then re-posted) and every send (its slot and address handle freed).
    /// Failed receives (flushes) are re-posted without being handed over. Call it
    /// after the device reported a completion event for this endpoint.
    ///
    /// # Errors
    /// Polling, re-arming or re-posting failed.
    pub fn poll(&mut self, mut f: impl FnMut(Completion<'_>)) -> Result<(), VerbsError> {
        // Arming first means a completion that lands while we drain raises a new
        // event instead of being missed.
        self.arm()?;
        let mut wcs: [MaybeUninit<ibv_wc>; POLL_BATCH] =
            [const { MaybeUninit::uninit() }; POLL_BATCH];
        loop {
            // SAFETY: the CQ is alive and `wcs` has room for POLL_BATCH completions.
            let n = unsafe {
                ibv_poll_cq(self.cq.as_ptr(), POLL_BATCH as i32, wcs.as_mut_ptr().cast())
            };
            if n < 0 {
                return Err(call_error(&self.dev.name, "ibv_poll_cq", -n));
            }
            for wc in &wcs[..n as usize] {
                // SAFETY: the first `n` entries were written by the poll.
                let wc = unsafe { wc.assume_init_ref() };
                self.complete(wc, &mut f)?;
            }
            if (n as usize) < POLL_BATCH {
                return Ok(());
            }
        }
    }

    fn complete(
        &mut self,
        wc: &ibv_wc,
        f: &mut impl FnMut(Completion<'_>),
    ) -> Result<(), VerbsError> {
        let ok = wc.status == ibv_wc_status::IBV_WC_SUCCESS;
        if wc.wr_id & SEND_BIT != 0 {
            let slot = (wc.wr_id & !SEND_BIT) as usize;
            if let Some(s) = self.sends.get_mut(slot).and_then(Option::take) {
                // SAFETY: the send that used this AH has completed.
                unsafe { ibv_destroy_ah(s.ah.as_ptr()) };
                self.free_sends.push(slot);
                f(Completion::Send { token: s.token, ok });
            }
            return Ok(());
        }
        let slot = wc.wr_id as usize;
        if slot >= self.recv_depth {
            return Ok(());
        }
        if ok && wc.opcode == ibv_wc_opcode::IBV_WC_RECV {
            let base = slot * RECV_LEN;
            let end = base + (wc.byte_len as usize).clamp(GRH_LEN, RECV_LEN);
            let has_grh = wc.wc_flags & ibv_wc_flags::IBV_WC_GRH.0 != 0;
            f(Completion::Recv {
                meta: RecvMeta {
                    slid: wc.slid,
                    src_qp: wc.src_qp,
                    dlid_path_bits: wc.dlid_path_bits,
                    pkey_index: wc.pkey_index,
                    sl: wc.sl,
                },
                grh: has_grh.then(|| &self.buf[base..base + GRH_LEN]),
                mad: &self.buf[base + GRH_LEN..end],
            });
        }
        self.post_recv(slot)
    }
}

impl Drop for UdEndpoint {
    fn drop(&mut self) {
        // SAFETY: the QP goes first so no work request uses the AHs or the buffer any
        // more; then the AHs of sends that never completed, the MR (before `buf` is
        // freed), and the CQ. Each handle is released once; the device handles outlive
        // them through `dev`.
        unsafe {
            ibv_destroy_qp(self.qp.as_ptr());
            for s in self.sends.iter_mut().filter_map(Option::take) {
                ibv_destroy_ah(s.ah.as_ptr());
            }
            ibv_dereg_mr(self.mr.as_ptr());
            ibv_destroy_cq(self.cq.as_ptr());
        }
    }
}

/// INIT (pkey index, port, Q_Key), RTR, RTS (SQ PSN 0): a UD QP's whole bring-up.
fn to_rts(qp: NonNull<ibv_qp>, cfg: &UdConfig) -> Result<(), (&'static str, i32)> {
    // SAFETY: an all-zero attribute structure is valid; only the masked fields are read.
    let mut attr: ibv_qp_attr = unsafe { MaybeUninit::zeroed().assume_init() };
    attr.qp_state = ibv_qp_state::IBV_QPS_INIT;
    attr.pkey_index = cfg.pkey_index;
    attr.port_num = cfg.port_num;
    attr.qkey = cfg.qkey;
    let mask = ibv_qp_attr_mask::IBV_QP_STATE
        | ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
        | ibv_qp_attr_mask::IBV_QP_PORT
        | ibv_qp_attr_mask::IBV_QP_QKEY;
    modify(qp, &mut attr, mask).map_err(|r| ("ibv_modify_qp(INIT)", r))?;
    attr.qp_state = ibv_qp_state::IBV_QPS_RTR;
    modify(qp, &mut attr, ibv_qp_attr_mask::IBV_QP_STATE).map_err(|r| ("ibv_modify_qp(RTR)", r))?;
    attr.qp_state = ibv_qp_state::IBV_QPS_RTS;
    attr.sq_psn = 0;
    modify(
        qp,
        &mut attr,
        ibv_qp_attr_mask::IBV_QP_STATE | ibv_qp_attr_mask::IBV_QP_SQ_PSN,
    )
    .map_err(|r| ("ibv_modify_qp(RTS)", r))
}

fn modify(qp: NonNull<ibv_qp>, attr: &mut ibv_qp_attr, mask: ibv_qp_attr_mask) -> Result<(), i32> {
    // SAFETY: the QP is alive and `attr` is a valid attribute structure.
    let r = unsafe { ibv_modify_qp(qp.as_ptr(), attr, mask.0 as i32) };
    if r == 0 { Ok(()) } else { Err(r) }
}
