//! One open umad descriptor, as the kernel's `ib_umad` keeps it: the header size
//! (pkey-index support on or off), the registered agents, and the checks its ioctls,
//! reads and writes make. Pure logic over byte buffers, so it is tested without a
//! process to preload into.

use acm_engine::PortId;
use acm_io_verbs::umad::register::{
    IOCTL_ENABLE_PKEY, IOCTL_REGISTER_AGENT, IOCTL_REGISTER_AGENT2, IOCTL_UNREGISTER_AGENT,
};
use acm_io_verbs::umad::{HEADER_LEN, UserMadHeader};
use acm_proto::mad::{MAD_LEN, MadHeaderPacket};

/// Agents per descriptor (`IB_UMAD_MAX_AGENTS`).
pub const MAX_AGENTS: usize = 32;
/// The header without the pkey index (`struct ib_user_mad_hdr_old`).
pub const OLD_HEADER_LEN: usize = 56;
/// What a write must hold after the header: the MAD and RMPP headers.
pub const RMPP_HDR_LEN: usize = 36;
/// What a send given back after its timeout carries: the MAD header only.
pub const MAD_HDR_LEN: usize = acm_proto::mad::MAD_HEADER_LEN;
/// The only registration flag the kernel knows (user-space RMPP).
const REG_FLAGS_CAP: u32 = 1;

/// A registered agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agent {
    /// QP0 or QP1.
    pub qpn: u32,
    /// Management class (0: a send-only agent).
    pub mgmt_class: u8,
    /// Class version.
    pub class_version: u8,
    /// RMPP version.
    pub rmpp_version: u8,
    /// The unsolicited methods it receives (bit `n` for method `n`).
    pub method_mask: u128,
}

/// One open umad descriptor.
#[derive(Debug)]
pub struct UmadFile {
    /// The port it serves.
    pub port: PortId,
    /// Unique among every descriptor this process opened, so that an answer for a
    /// closed descriptor never reaches a new one with the same number.
    pub serial: u64,
    use_pkey_index: bool,
    already_used: bool,
    agents: [Option<Agent>; MAX_AGENTS],
    /// Set when the device went away: reads and writes fail with EIO.
    pub dead: bool,
}

/// A MAD the application wrote, checked and ready for the fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The header as written.
    pub header: UserMadHeader,
    /// The MAD, padded to its full length.
    pub mad: Box<[u8; MAD_LEN]>,
    /// Whether it is a response (method bit 0x80): nothing comes back for it.
    pub is_response: bool,
}

impl UmadFile {
    /// A fresh descriptor: old header, no agents.
    #[must_use]
    pub fn new(port: PortId, serial: u64) -> Self {
        Self {
            port,
            serial,
            use_pkey_index: false,
            already_used: false,
            agents: [None; MAX_AGENTS],
            dead: false,
        }
    }

    /// The header size reads and writes use.
    #[must_use]
    pub fn header_len(&self) -> usize {
        if self.use_pkey_index {
            HEADER_LEN
        } else {
            OLD_HEADER_LEN
        }
    }

    /// Agent `id`, if registered.
    #[must_use]
    pub fn agent(&self, id: u32) -> Option<Agent> {
        self.agents.get(id as usize).copied().flatten()
    }

    /// One ioctl; `arg` is the request structure (empty for ENABLE_PKEY), written
    /// back as the kernel writes it. `no_agent2` makes REGISTER_AGENT2 unknown, as on
    /// kernels before 3.18. The error is the errno.
    pub fn ioctl(&mut self, request: u32, arg: &mut [u8], no_agent2: bool) -> Result<(), i32> {
        match request {
            IOCTL_REGISTER_AGENT2 if !no_agent2 => self.register2(arg),
            IOCTL_REGISTER_AGENT => self.register1(arg),
            IOCTL_ENABLE_PKEY => {
                if self.already_used {
                    return Err(libc::EINVAL);
                }
                self.use_pkey_index = true;
                Ok(())
            }
            IOCTL_UNREGISTER_AGENT => {
                let id = read_u32(arg, 0) as usize;
                match self.agents.get_mut(id) {
                    Some(slot @ Some(_)) => {
                        *slot = None;
                        Ok(())
                    }
                    _ => Err(libc::EINVAL),
                }
            }
            _ => Err(libc::ENOTTY),
        }
    }

    fn free_id(&self) -> Result<usize, i32> {
        self.agents
            .iter()
            .position(Option::is_none)
            .ok_or(libc::ENOMEM)
    }

    /// `struct ib_user_mad_reg_req2` (40 bytes).
    fn register2(&mut self, a: &mut [u8]) -> Result<(), i32> {
        if a.len() < 40 {
            return Err(libc::EFAULT);
        }
        let qpn = read_u32(a, 4);
        if qpn > 1 {
            return Err(libc::EINVAL);
        }
        let flags = read_u32(a, 12);
        if flags & !REG_FLAGS_CAP != 0 {
            // The kernel tells which flags it supports.
            a[12..16].copy_from_slice(&REG_FLAGS_CAP.to_ne_bytes());
            return Err(libc::EINVAL);
        }
        let id = self.free_id()?;
        let mgmt_class = a[8];
        if mgmt_class != 0 && read_u32(a, 32) & 0xFF00_0000 != 0 {
            return Err(libc::EINVAL);
        }
        let words = [read_u64(a, 16), read_u64(a, 24)];
        self.agents[id] = Some(Agent {
            qpn,
            mgmt_class,
            class_version: a[9],
            rmpp_version: a[36],
            method_mask: u128::from(words[0]) | (u128::from(words[1]) << 64),
        });
        a[..4].copy_from_slice(&(id as u32).to_ne_bytes());
        if !self.already_used {
            self.already_used = true;
            self.use_pkey_index = true;
        }
        Ok(())
    }

    /// `struct ib_user_mad_reg_req` (28 bytes).
    fn register1(&mut self, a: &mut [u8]) -> Result<(), i32> {
        if a.len() < 28 {
            return Err(libc::EFAULT);
        }
        let qpn = u32::from(a[20]);
        if qpn > 1 {
            return Err(libc::EINVAL);
        }
        let id = self.free_id()?;
        let method_mask = (0..4).fold(0u128, |m, i| {
            m | (u128::from(read_u32(a, 4 + 4 * i)) << (32 * i))
        });
        self.agents[id] = Some(Agent {
            qpn,
            mgmt_class: a[21],
            class_version: a[22],
            rmpp_version: a[26],
            method_mask,
        });
        a[..4].copy_from_slice(&(id as u32).to_ne_bytes());
        self.already_used = true;
        Ok(())
    }

    /// Checks a write as `ib_umad_write` does: room for the header and the RMPP
    /// header (EINVAL), an agent id in range (EINVAL) and registered (EIO).
    pub fn write(&self, buf: &[u8]) -> Result<Outgoing, i32> {
        if self.dead {
            return Err(libc::EIO);
        }
        let hl = self.header_len();
        if buf.len() < hl + RMPP_HDR_LEN {
            return Err(libc::EINVAL);
        }
        let mut full = [0u8; HEADER_LEN];
        full[..hl].copy_from_slice(&buf[..hl]);
        let header = UserMadHeader::parse(&full).ok_or(libc::EINVAL)?;
        if header.agent_id as usize >= MAX_AGENTS {
            return Err(libc::EINVAL);
        }
        if self.agent(header.agent_id).is_none() {
            return Err(libc::EIO);
        }
        let body = &buf[hl..];
        let mut mad = Box::new([0u8; MAD_LEN]);
        let n = body.len().min(MAD_LEN);
        mad[..n].copy_from_slice(&body[..n]);
        let is_response = MadHeaderPacket::new_unchecked(&mad[..])
            .method()
            .is_response();
        Ok(Outgoing {
            header,
            mad,
            is_response,
        })
    }

    /// The packet a read returns for a MAD that arrived for agent `agent`.
    #[must_use]
    pub fn received(&self, agent: u32, from: &UserMadHeader, mad: &[u8]) -> Vec<u8> {
        let h = UserMadHeader {
            agent_id: agent,
            status: 0,
            timeout_ms: 0,
            retries: 0,
            length: (self.header_len() + mad.len()) as u32,
            ..*from
        };
        self.packet(&h, mad)
    }

    /// The agent that receives an unsolicited MAD of this class, version and method,
    /// as the kernel finds it by the registrations' method masks.
    #[must_use]
    pub fn agent_for(&self, mgmt_class: u8, class_version: u8, method: u8) -> Option<u32> {
        self.agents.iter().enumerate().find_map(|(id, a)| {
            let a = a.as_ref()?;
            let wanted = a.mgmt_class == mgmt_class
                && a.class_version == class_version
                && method < 128
                && a.method_mask & (1u128 << method) != 0;
            wanted.then_some(id as u32)
        })
    }

    /// The packet a read returns for a send given back with `status` (ETIMEDOUT):
    /// the header as written, then the MAD header with the TID the fabric carried.
    #[must_use]
    pub fn given_back(&self, sent: &Outgoing, agent: u32, status: u32, tid: u64) -> Vec<u8> {
        let h = UserMadHeader {
            agent_id: agent,
            status,
            ..sent.header
        };
        let mut head = [0u8; MAD_HDR_LEN];
        head.copy_from_slice(&sent.mad[..MAD_HDR_LEN]);
        MadHeaderPacket::new_unchecked(&mut head[..]).set_tid(tid);
        self.packet(&h, &head)
    }

    fn packet(&self, h: &UserMadHeader, body: &[u8]) -> Vec<u8> {
        let mut full = [0u8; HEADER_LEN];
        h.emit(&mut full);
        let mut p = full[..self.header_len()].to_vec();
        p.extend_from_slice(body);
        p
    }
}

fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(w)
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_engine::DeviceId;
    use acm_io_verbs::umad::register::AgentRequest;
    use acm_proto::mad::{MadHeaderRepr, Method, MgmtClass};

    fn file() -> UmadFile {
        UmadFile::new(
            PortId {
                device: DeviceId(0),
                port: 1,
            },
            1,
        )
    }

    /// Registers an SA agent as a current kernel lets it: REGISTER_AGENT2.
    fn register_sa(f: &mut UmadFile) -> Result<(), i32> {
        f.ioctl(
            IOCTL_REGISTER_AGENT2,
            &mut AgentRequest::SA.reg_req2(),
            false,
        )
    }

    /// A file with an SA agent registered, id 0.
    fn file_with_sa_agent() -> UmadFile {
        let mut f = file();
        register_sa(&mut f).expect("the first agent registers");
        f
    }

    #[test]
    fn unsolicited_mads_find_the_agent_whose_mask_asks_for_them() {
        let mut f = file();
        let mut plain = AgentRequest::SA.reg_req2();
        f.ioctl(IOCTL_REGISTER_AGENT2, &mut plain, false).unwrap();
        assert_eq!(f.agent_for(0x03, 2, 0x06), None, "no mask, no Reports");
        let mut reports = AgentRequest::SA_REPORTS.reg_req2();
        f.ioctl(IOCTL_REGISTER_AGENT2, &mut reports, false).unwrap();
        assert_eq!(f.agent_for(0x03, 2, 0x06), Some(1));
        assert_eq!(f.agent_for(0x03, 1, 0x06), None, "another class version");
        assert_eq!(f.agent_for(0x03, 2, 0x05), None, "another method");
        let mut old = file();
        let mut r1 = AgentRequest::SA_REPORTS.reg_req();
        old.ioctl(IOCTL_REGISTER_AGENT, &mut r1, false).unwrap();
        assert_eq!(
            old.agent_for(0x03, 2, 0x06),
            Some(0),
            "REGISTER_AGENT's mask too"
        );
    }

    #[test]
    fn register_agent2_turns_on_the_pkey_header_and_enable_pkey_comes_too_late() {
        let mut f = file();
        assert_eq!(f.header_len(), OLD_HEADER_LEN);
        let mut r = AgentRequest::SA.reg_req2();
        f.ioctl(IOCTL_REGISTER_AGENT2, &mut r, false).unwrap();
        assert_eq!(read_u32(&r, 0), 0, "first agent id");
        assert_eq!(f.header_len(), HEADER_LEN);
        assert_eq!(
            f.ioctl(IOCTL_ENABLE_PKEY, &mut [], false),
            Err(libc::EINVAL)
        );
        let mut r = AgentRequest::SA.reg_req2();
        f.ioctl(IOCTL_REGISTER_AGENT2, &mut r, false).unwrap();
        assert_eq!(read_u32(&r, 0), 1, "second agent id");
    }

    #[test]
    fn an_old_kernel_refuses_agent2_and_takes_the_fallback() {
        let mut f = file();
        let mut r2 = AgentRequest::SA.reg_req2();
        assert_eq!(
            f.ioctl(IOCTL_REGISTER_AGENT2, &mut r2, true),
            Err(libc::ENOTTY)
        );
        f.ioctl(IOCTL_ENABLE_PKEY, &mut [], true).unwrap();
        let mut r1 = AgentRequest::SA.reg_req();
        f.ioctl(IOCTL_REGISTER_AGENT, &mut r1, true).unwrap();
        assert_eq!(f.header_len(), HEADER_LEN);
        assert_eq!(f.agent(0).map(|a| a.mgmt_class), Some(0x03));
    }

    #[test]
    fn registration_checks() {
        let mut f = file();
        let mut bad_qp = AgentRequest::SA.reg_req2();
        bad_qp[4] = 2;
        assert_eq!(
            f.ioctl(IOCTL_REGISTER_AGENT2, &mut bad_qp, false),
            Err(libc::EINVAL)
        );
        let mut bad_flags = AgentRequest::SA.reg_req2();
        bad_flags[12] = 6;
        assert_eq!(
            f.ioctl(IOCTL_REGISTER_AGENT2, &mut bad_flags, false),
            Err(libc::EINVAL)
        );
        assert_eq!(read_u32(&bad_flags, 12), REG_FLAGS_CAP);
        for _ in 0..MAX_AGENTS {
            register_sa(&mut f).unwrap();
        }
        assert_eq!(register_sa(&mut f), Err(libc::ENOMEM));
        let mut id = 5u32.to_ne_bytes();
        f.ioctl(IOCTL_UNREGISTER_AGENT, &mut id, false).unwrap();
        assert_eq!(
            f.ioctl(IOCTL_UNREGISTER_AGENT, &mut id, false),
            Err(libc::EINVAL)
        );
        assert_eq!(f.ioctl(0x1234, &mut [], false), Err(libc::ENOTTY));
    }

    fn sa_write(agent: u32) -> Vec<u8> {
        let h = UserMadHeader {
            agent_id: agent,
            timeout_ms: 100,
            retries: 2,
            lid: 1,
            qpn: 1,
            qkey: 0x8001_0000,
            ..UserMadHeader::default()
        };
        let mut b = vec![0u8; HEADER_LEN + MAD_LEN];
        h.emit(&mut b);
        MadHeaderRepr {
            base_version: 1,
            mgmt_class: MgmtClass::SA,
            method: Method::GET_TABLE,
            tid: 0x1234,
            ..MadHeaderRepr::default()
        }
        .emit(&mut b[HEADER_LEN..]);
        b
    }

    #[test]
    fn writes_are_checked_as_the_kernel_checks_them() {
        let mut f = file_with_sa_agent();
        let w = sa_write(0);
        assert_eq!(f.write(&w[..HEADER_LEN + 35]), Err(libc::EINVAL));
        assert_eq!(f.write(&sa_write(40)), Err(libc::EINVAL));
        assert_eq!(f.write(&sa_write(3)), Err(libc::EIO));
        let out = f.write(&w).unwrap();
        assert_eq!((out.header.timeout_ms, out.header.retries), (100, 2));
        assert!(!out.is_response);
        f.dead = true;
        assert_eq!(f.write(&w), Err(libc::EIO));
    }

    #[test]
    fn a_send_given_back_carries_status_and_the_mad_header_only() {
        let f = file_with_sa_agent();
        let out = f.write(&sa_write(0)).unwrap();
        let p = f.given_back(&out, 0, 110, 0x0000_0101_0000_1234);
        assert_eq!(p.len(), HEADER_LEN + MAD_HDR_LEN);
        let h = UserMadHeader::parse(&p).unwrap();
        assert_eq!(h.status, 110);
        assert_eq!(
            MadHeaderPacket::new_unchecked(&p[HEADER_LEN..]).tid(),
            0x0000_0101_0000_1234
        );
        let r = f.received(0, &out.header, &[7u8; MAD_LEN]);
        assert_eq!(r.len(), HEADER_LEN + MAD_LEN);
        assert_eq!(UserMadHeader::parse(&r).unwrap().length, 320);
    }
}
