//! The kernel's user-MAD device, emulated: opening `<dev root>/umad<N>` gives one end
//! of a `SOCK_SEQPACKET` socket pair whose other end the emulation writes, so reads,
//! poll and epoll work natively and each read takes one packet; the library's
//! `read`, `write`, `ioctl` and `close` wrappers ([`intercept`]) add what `ib_umad`
//! does on top ([`mod@file`]). SA sends go to the hub, which rewrites the TID's upper half
//! (the agent's, as the kernel does), answers through its SA and gives a send back
//! with ETIMEDOUT after its timeout × (retries + 1). An SA MAD from the hub that answers
//! no send (a Report, docs/protocol/sa.md §9) goes to the port's agent whose method
//! mask asks for its class, version and method, as the kernel routes unsolicited MADs;
//! responses written (a ReportResp) go to the hub once, remembered by nobody.

pub mod file;
#[cfg(not(test))]
pub mod intercept;

use crate::fdset::FdSet;
use crate::ffi::lock;
use acm_engine::{Mad, PortId, SaDest, SaSend};
use acm_io_verbs::umad::UserMadHeader;
use acm_proto::mad::{MadHeaderPacket, UmadStatus};
use file::{Outgoing, UmadFile};
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

/// An open descriptor: the kernel side of its socket pair and its state.
#[derive(Debug)]
pub struct Open {
    /// The end the emulation writes packets to.
    pub kernel: OwnedFd,
    /// What the kernel knows about the descriptor.
    pub file: UmadFile,
}

/// A send waiting for its answer.
#[derive(Debug)]
struct Pending {
    fd: i32,
    serial: u64,
    sent: Outgoing,
}

/// The descriptors and their sends in flight.
#[derive(Debug)]
pub struct Umad {
    /// Open descriptors by the application's fd.
    pub files: BTreeMap<i32, Open>,
    /// Sends by port and the TID's lower half (the part the sender chose).
    pending: BTreeMap<(PortId, u32), Pending>,
    next_serial: u64,
}

/// The umad state.
pub static UMAD: Mutex<Umad> = Mutex::new(Umad {
    files: BTreeMap::new(),
    pending: BTreeMap::new(),
    next_serial: 1,
});

/// The emulated umad descriptors.
static FDS: FdSet = FdSet::new();

/// Whether `fd` is an emulated umad descriptor (one atomic load).
pub fn is_umad(fd: i32) -> bool {
    FDS.contains(fd)
}

impl Umad {
    /// Registers a newly opened descriptor.
    pub fn add(&mut self, fd: i32, kernel: OwnedFd, port: PortId) {
        let serial = self.next_serial;
        self.next_serial += 1;
        self.files.insert(
            fd,
            Open {
                kernel,
                file: UmadFile::new(port, serial),
            },
        );
        FDS.set(fd, true);
    }

    /// Forgets a descriptor being closed; its sends' answers are dropped.
    pub fn remove(&mut self, fd: i32) {
        FDS.set(fd, false);
        self.files.remove(&fd);
        self.pending.retain(|_, p| p.fd != fd);
    }

    /// A checked write: what goes to the hub (a send that expects no answer, a
    /// response such as the ReportResp to an SA Report among them, is not
    /// remembered). EINVAL for a second request with the TID of one still
    /// outstanding, as the kernel refuses duplicates.
    pub fn write(&mut self, fd: i32, buf: &[u8]) -> Result<Option<SaSend>, i32> {
        let open = self.files.get(&fd).ok_or(libc::EBADF)?;
        let out = open.file.write(buf)?;
        let port = open.file.port;
        let serial = open.file.serial;
        let tid = MadHeaderPacket::new_unchecked(&out.mad[..])
            .try_tid()
            .unwrap_or(0);
        let key = (port, tid as u32);
        if !out.is_response && self.pending.contains_key(&key) {
            return Err(libc::EINVAL);
        }
        let h = out.header;
        let send = SaSend {
            port,
            tid,
            dest: SaDest {
                dlid: h.lid,
                sl: h.sl,
                pkey_index: h.pkey_index,
                remote_qpn: h.qpn,
                remote_qkey: h.qkey,
            },
            timeout_ms: h.timeout_ms,
            retries: h.retries,
            mad: Mad(*out.mad),
        };
        if h.timeout_ms > 0 && !out.is_response {
            self.pending.insert(
                key,
                Pending {
                    fd,
                    serial,
                    sent: out,
                },
            );
        }
        Ok(Some(send))
    }

    /// The packet for an answer to a pending send, and where it goes.
    fn answer(
        &mut self,
        port: PortId,
        tid: u64,
        make: impl FnOnce(&UmadFile, &Outgoing) -> Vec<u8>,
    ) -> Option<(i32, Vec<u8>)> {
        let p = self.pending.remove(&(port, tid as u32))?;
        let open = self
            .files
            .get(&p.fd)
            .filter(|o| o.file.serial == p.serial)?;
        // An agent unregistered since the send gets nothing.
        open.file.agent(p.sent.header.agent_id)?;
        Some((open.kernel.as_raw_fd(), make(&open.file, &p.sent)))
    }
}

/// Queues `packet` on the descriptor whose kernel end is `kernel`. A full socket
/// drops it, as the kernel drops MADs it cannot queue.
fn queue(kernel: i32, packet: &[u8]) {
    // SAFETY: `kernel` is an open socket owned by the umad table (the caller holds
    // its lock); `packet` is a valid buffer.
    let _ = unsafe {
        libc::send(
            kernel,
            packet.as_ptr().cast(),
            packet.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
}

/// The SA's answer to one of our sends.
pub fn sa_response(port: PortId, mad: &[u8]) {
    let tid = MadHeaderPacket::new_unchecked(mad).try_tid().unwrap_or(0);
    let mut u = lock(&UMAD);
    if let Some((fd, p)) = u.answer(port, tid, |f, sent| {
        f.received(sent.header.agent_id, &sent.header, mad)
    }) {
        queue(fd, &p);
        return;
    }
    // Not the answer to a send: an unsolicited MAD (the SA's Report), handed to the
    // agent of this port whose method mask asks for it, if any.
    let (class, version, method) = match mad {
        [_, c, v, m, ..] if m & 0x80 == 0 => (*c, *v, *m),
        _ => return,
    };
    let from = UserMadHeader {
        qpn: 1,
        qkey: acm_proto::acm_mad::ACM_QKEY,
        lid: crate::config::current().and_then(|c| c.sm_lid).unwrap_or(1),
        ..UserMadHeader::default()
    };
    let target = u.files.values().find_map(|o| {
        let agent = (o.file.port == port && !o.file.dead)
            .then(|| o.file.agent_for(class, version, method))??;
        Some((o.kernel.as_raw_fd(), o.file.received(agent, &from, mad)))
    });
    if let Some((fd, p)) = target {
        queue(fd, &p);
    }
}

/// A send that got no answer, given back with `status`.
pub fn sa_send_failed(port: PortId, tid: u64, status: UmadStatus) {
    let mut u = lock(&UMAD);
    if let Some((fd, p)) = u.answer(port, tid, |f, sent| {
        f.given_back(sent, sent.header.agent_id, status.0 as u32, tid)
    }) {
        queue(fd, &p);
    }
}

/// Device `device` was removed or died: its descriptors fail from now on and their
/// readers are woken, as the kernel's do when the HCA goes.
pub fn device_dead(device: acm_engine::DeviceId) {
    let mut u = lock(&UMAD);
    u.pending.retain(|(port, _), _| port.device != device);
    for o in u
        .files
        .values_mut()
        .filter(|o| o.file.port.device == device)
    {
        o.file.dead = true;
        // SAFETY: the kernel end is open; shutting its writing side down makes the
        // application's reads return at once.
        unsafe { libc::shutdown(o.kernel.as_raw_fd(), libc::SHUT_WR) };
    }
}

/// The device is gone: every descriptor fails from now on, as the kernel's do when
/// the port is removed, and readers are woken.
pub fn all_dead() {
    let mut u = lock(&UMAD);
    u.pending.clear();
    for o in u.files.values_mut() {
        o.file.dead = true;
        // SAFETY: the kernel end is open; shutting its writing side down makes the
        // application's reads return at once.
        unsafe { libc::shutdown(o.kernel.as_raw_fd(), libc::SHUT_WR) };
    }
}
