//! Agent registration requests and the umad ioctl numbers.
//!
//! The kernel's `IB_USER_MAD_REGISTER_AGENT2` (`struct ib_user_mad_reg_req2`, 40 bytes)
//! is tried first: it also switches the descriptor to the 64-byte header with the pkey
//! index. Kernels without it (before 3.18) get `IB_USER_MAD_ENABLE_PKEY` and the older
//! `IB_USER_MAD_REGISTER_AGENT` (`struct ib_user_mad_reg_req`, 28 bytes). Both requests
//! are built here as plain bytes, so their layout is tested without a kernel; the
//! numbers and offsets were checked against `rdma/ib_user_mad.h` with `sizeof` and
//! `offsetof`.

use acm_proto::mad::MgmtClass;
use acm_proto::sa::SA_CLASS_VERSION;

/// `_IOWR(0x1b, 1, struct ib_user_mad_reg_req)`.
pub const IOCTL_REGISTER_AGENT: u32 = 0xC01C_1B01;
/// `_IOW(0x1b, 2, __u32)`.
pub const IOCTL_UNREGISTER_AGENT: u32 = 0x4004_1B02;
/// `_IO(0x1b, 3)`.
pub const IOCTL_ENABLE_PKEY: u32 = 0x1B03;
/// `_IOWR(0x1b, 4, struct ib_user_mad_reg_req2)`.
pub const IOCTL_REGISTER_AGENT2: u32 = 0xC028_1B04;

/// RMPP version 1: the kernel reassembles multi-segment SA responses.
pub const RMPP_VERSION: u8 = 1;
/// The general services QP, where SA traffic goes.
pub const GSI_QPN: u8 = 1;

/// The SA method Report (0x06): the SA's unsolicited notice of a trap a port
/// subscribed to.
pub const METHOD_REPORT: u8 = 0x06;

/// What to register: a client agent for one management class. Responses find the agent
/// by the TID's upper half whatever the mask; the method mask says which unsolicited
/// (request) methods of the class and version the kernel hands to this agent (bit `n`
/// for method `n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentRequest {
    /// Management class.
    pub mgmt_class: u8,
    /// Class version.
    pub class_version: u8,
    /// RMPP version (0 = none).
    pub rmpp_version: u8,
    /// Unsolicited methods received: bit `n` of the 128 for method `n`.
    pub method_mask: u128,
}

impl AgentRequest {
    /// The SA client agent the daemon uses: class 0x03 version 2, RMPP 1.
    ///
    /// The reference registers class version 1 and sends version 2, which works
    /// because solicited responses are routed by TID; registering the version the
    /// MADs carry says what is meant.
    pub const SA: Self = Self {
        mgmt_class: MgmtClass::SA.0,
        class_version: SA_CLASS_VERSION,
        rmpp_version: RMPP_VERSION,
        method_mask: 0,
    };

    /// [`AgentRequest::SA`] that also receives the SA's Reports (method 0x06), for the
    /// trap subscriptions the reference never makes (`sm_events`). The kernel hands an
    /// unsolicited method of a class and version to one agent per port: another
    /// process registered for them makes the registration fail (EINVAL).
    pub const SA_REPORTS: Self = Self {
        method_mask: 1 << METHOD_REPORT,
        ..Self::SA
    };

    /// `struct ib_user_mad_reg_req2`: id (out) at 0, qpn u32 at 4, class at 8,
    /// version at 9, flags u32 at 12, method mask at 16..32, oui u32 at 32, RMPP
    /// version at 36.
    #[must_use]
    pub fn reg_req2(&self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[4..8].copy_from_slice(&u32::from(GSI_QPN).to_ne_bytes());
        b[8] = self.mgmt_class;
        b[9] = self.class_version;
        // `__u64 method_mask[2]`: methods 0–63, then 64–127.
        b[16..24].copy_from_slice(&(self.method_mask as u64).to_ne_bytes());
        b[24..32].copy_from_slice(&((self.method_mask >> 64) as u64).to_ne_bytes());
        b[36] = self.rmpp_version;
        b
    }

    /// `struct ib_user_mad_reg_req`: id (out) at 0, method mask at 4..20, qpn u8 at
    /// 20, class at 21, version at 22, oui at 23..26, RMPP version at 26.
    #[must_use]
    pub fn reg_req(&self) -> [u8; 28] {
        let mut b = [0u8; 28];
        // `__u32 method_mask[4]`: methods 0–31, 32–63, 64–95, 96–127.
        for i in 0..4 {
            let word = (self.method_mask >> (32 * i)) as u32;
            b[4 + 4 * i..8 + 4 * i].copy_from_slice(&word.to_ne_bytes());
        }
        b[20] = GSI_QPN;
        b[21] = self.mgmt_class;
        b[22] = self.class_version;
        b[26] = self.rmpp_version;
        b
    }
}

/// The agent id the kernel wrote back into either request.
#[must_use]
pub fn agent_id(req: &[u8]) -> u32 {
    u32::from_ne_bytes([req[0], req[1], req[2], req[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `_IOC(dir, type, nr, size)`: the numbers above follow from the structure sizes.
    const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
        (dir << 30) | (size << 16) | (0x1b << 8) | nr
    }

    #[test]
    fn ioctl_numbers_encode_the_structure_sizes() {
        const READ_WRITE: u32 = 3;
        const WRITE: u32 = 1;
        assert_eq!(IOCTL_REGISTER_AGENT, ioc(READ_WRITE, 1, 28));
        assert_eq!(IOCTL_UNREGISTER_AGENT, ioc(WRITE, 2, 4));
        assert_eq!(IOCTL_ENABLE_PKEY, ioc(0, 3, 0));
        assert_eq!(IOCTL_REGISTER_AGENT2, ioc(READ_WRITE, 4, 40));
        assert_eq!(AgentRequest::SA.reg_req().len(), 28);
        assert_eq!(AgentRequest::SA.reg_req2().len(), 40);
    }

    #[test]
    fn sa_registration_bytes() {
        let r2 = AgentRequest::SA.reg_req2();
        assert_eq!(&r2[0..4], &[0; 4], "id is filled in by the kernel");
        assert_eq!(&r2[4..8], &1u32.to_ne_bytes(), "QP1");
        assert_eq!((r2[8], r2[9]), (0x03, 2));
        assert_eq!(&r2[12..36], &[0; 24], "no flags, no method mask, no OUI");
        assert_eq!(r2[36], 1);
        let r1 = AgentRequest::SA.reg_req();
        assert_eq!(&r1[..20], &[0; 20]);
        assert_eq!(&r1[20..23], &[1, 0x03, 2]);
        assert_eq!(r1[26], 1);
    }

    #[test]
    fn report_registration_sets_method_6_in_both_layouts() {
        let r2 = AgentRequest::SA_REPORTS.reg_req2();
        assert_eq!(
            &r2[16..24],
            &0x40u64.to_ne_bytes(),
            "bit 6 of the first word"
        );
        assert_eq!(&r2[24..32], &[0; 8]);
        let plain = AgentRequest::SA.reg_req2();
        assert_eq!((&r2[..16], &r2[32..]), (&plain[..16], &plain[32..]));
        let r1 = AgentRequest::SA_REPORTS.reg_req();
        assert_eq!(&r1[4..8], &0x40u32.to_ne_bytes());
        assert_eq!(&r1[8..20], &[0; 12]);
        let high = AgentRequest {
            method_mask: 1 << 100,
            ..AgentRequest::SA
        };
        assert_eq!(&high.reg_req()[16..20], &(1u32 << 4).to_ne_bytes());
        assert_eq!(&high.reg_req2()[24..32], &(1u64 << 36).to_ne_bytes());
    }

    #[test]
    fn agent_id_is_read_back_in_host_order() {
        let mut r = AgentRequest::SA.reg_req2();
        r[..4].copy_from_slice(&42u32.to_ne_bytes());
        assert_eq!(agent_id(&r), 42);
    }
}
