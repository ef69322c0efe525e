//! Translations between what acm-io-verbs reports and takes and what the engine says,
//! kept apart from the I/O so that each is tested without hardware.

use acm_engine::rate_from_width_speed;
use acm_engine::{AddressVector, PortEvent, SaDest};
use acm_engine::{DeviceDesc, DeviceId, PortAttrs, PortState};
use acm_io_verbs::av::{GrhSpec, UdAddress};
use acm_io_verbs::event::AsyncEventKind;
use acm_io_verbs::umad::MadSend;
use acm_io_verbs::{LinkLayer, PortInfo};
use acm_proto::Mtu;

/// The engine's description of a port.
#[must_use]
pub(crate) fn port_attrs(p: &PortInfo) -> PortAttrs {
    PortAttrs {
        state: if p.state.is_active() {
            PortState::Active
        } else {
            PortState::Down
        },
        link_layer_ib: p.link_layer == LinkLayer::InfiniBand,
        lid: p.lid,
        lmc: p.lmc,
        sm_lid: p.sm_lid,
        sm_sl: p.sm_sl,
        gids: p.gids.clone(),
        pkeys: p.pkeys.clone(),
        rate: rate_from_width_speed(p.active_width, p.active_speed),
        // sysfs does not publish the MTU; a verbs query always does.
        mtu: Mtu(p.active_mtu.unwrap_or(0)),
        subnet_timeout: p.subnet_timeout.unwrap_or(0),
    }
}

/// The engine's description of a device whose ports, numbered from 1, are `ports`.
#[must_use]
pub(crate) fn device_desc(id: DeviceId, name: &str, guid: u64, ports: &[PortInfo]) -> DeviceDesc {
    DeviceDesc {
        id,
        name: name.to_owned(),
        guid,
        ports: ports.iter().map(port_attrs).collect(),
    }
}

/// The address of a UD send the engine asked for, from port `port_num`.
#[must_use]
pub(crate) fn ud_address(av: &AddressVector, port_num: u8) -> UdAddress {
    UdAddress {
        port_num,
        dlid: av.dlid,
        sl: av.sl,
        src_path_bits: av.src_path_bits,
        static_rate: av.static_rate,
        // Every ACM send carries a GRH (docs/protocol/acm-mad.md §1).
        grh: Some(GrhSpec {
            dgid: av.grh.dgid,
            flow_label: av.grh.flow_label,
            sgid_index: av.grh.sgid_index,
            hop_limit: av.grh.hop_limit,
            traffic_class: av.grh.tclass,
        }),
        remote_qpn: av.remote_qpn,
        remote_qkey: av.remote_qkey,
    }
}

/// The umad send for an SA MAD the engine asked for.
#[must_use]
pub(crate) fn sa_send<'a>(
    dest: &SaDest,
    timeout_ms: u32,
    retries: u32,
    mad: &'a [u8],
) -> MadSend<'a> {
    MadSend {
        lid: dest.dlid,
        sl: dest.sl,
        qpn: dest.remote_qpn,
        qkey: dest.remote_qkey,
        pkey_index: dest.pkey_index,
        timeout_ms,
        retries,
        mad,
    }
}

/// The engine's port event for an async event, given the port's fresh attributes
/// (queried after the event). `None` for events the engine does not act on.
#[must_use]
pub(crate) fn port_event(kind: AsyncEventKind, attrs: Option<PortAttrs>) -> Option<PortEvent> {
    Some(match (kind, attrs) {
        (AsyncEventKind::PortActive, Some(a)) => PortEvent::Active(a),
        (AsyncEventKind::PortError, _) => PortEvent::Down,
        (AsyncEventKind::LidChange, Some(a)) => PortEvent::LidChange(a),
        (AsyncEventKind::SmChange, Some(a)) => PortEvent::SmChange(a),
        (AsyncEventKind::GidChange, Some(a)) => PortEvent::GidChange(a),
        (AsyncEventKind::PkeyChange, Some(a)) => PortEvent::PkeyChange(a),
        (AsyncEventKind::ClientReregister, _) => PortEvent::ClientReregister,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_engine::GlobalRoute;
    use acm_io_verbs::PortState as HwState;
    use acm_proto::{Gid, Rate};

    fn active_port() -> PortInfo {
        PortInfo {
            number: 1,
            state: HwState::ACTIVE,
            link_layer: LinkLayer::InfiniBand,
            lid: 0x1f,
            lmc: 2,
            sm_lid: 1,
            sm_sl: 3,
            active_width: 2,
            active_speed: 32,
            active_mtu: Some(5),
            subnet_timeout: Some(18),
            gids: vec![Gid([
                0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0xa1, 0xb2, 0xc1,
            ])],
            pkeys: vec![0xffff, 0x8001],
        }
    }

    #[test]
    fn a_queried_port_becomes_engine_attributes() {
        let a = port_attrs(&active_port());
        assert!(a.usable());
        assert_eq!((a.lid, a.lmc, a.sm_lid, a.sm_sl), (0x1f, 2, 1, 3));
        assert_eq!(a.rate, Rate::RATE_100); // 4X EDR
        assert_eq!(a.mtu, Mtu::MTU_4096);
        assert_eq!(a.subnet_timeout_ms(), 1024);
        assert_eq!(a.pkeys, vec![0xffff, 0x8001]);
        assert_eq!(a.sa_pkey_index(), 0);
    }

    #[test]
    fn roce_and_down_ports_are_not_usable() {
        let mut p = active_port();
        p.link_layer = LinkLayer::Ethernet;
        assert!(!port_attrs(&p).usable());
        let mut q = active_port();
        q.state = HwState::DOWN;
        assert_eq!(port_attrs(&q).state, PortState::Down);
    }

    #[test]
    fn a_device_keeps_its_port_order() {
        let mut p2 = active_port();
        p2.number = 2;
        p2.state = HwState::DOWN;
        let d = device_desc(
            DeviceId(0),
            "mlx5_0",
            0x0002_c903_00a1_b2c0,
            &[active_port(), p2],
        );
        assert_eq!(d.name, "mlx5_0");
        assert_eq!(d.guid, 0x0002_c903_00a1_b2c0);
        assert_eq!(d.ports.len(), 2);
        assert!(d.ports[0].usable() && !d.ports[1].usable());
    }

    /// A unicast ACM response as the engine emits it (docs/protocol/acm-mad.md §1): to
    /// the requester's LID and QPN with its GID from the GRH.
    #[test]
    fn an_engine_send_becomes_a_ud_address_with_a_grh() {
        let dgid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0, 0, 0x17]);
        let av = AddressVector {
            dlid: 0x17,
            sl: 1,
            src_path_bits: 2,
            static_rate: 7,
            grh: GlobalRoute {
                dgid,
                flow_label: 0x1234,
                hop_limit: 1,
                tclass: 0x40,
                sgid_index: 0,
            },
            remote_qpn: 0x48,
            remote_qkey: 0x8001_0000,
        };
        let u = ud_address(&av, 2);
        assert_eq!(u.port_num, 2);
        assert_eq!(
            (u.dlid, u.sl, u.src_path_bits, u.static_rate),
            (0x17, 1, 2, 7)
        );
        assert_eq!((u.remote_qpn, u.remote_qkey), (0x48, 0x8001_0000));
        let g = u.grh.expect("every ACM send has a GRH");
        assert_eq!(g.dgid, dgid);
        assert_eq!(
            (g.flow_label, g.hop_limit, g.traffic_class),
            (0x1234, 1, 0x40)
        );
        assert!(!u.is_multicast());
        // A request to group 0: its MLID and QPN 0xFFFFFF.
        let mc = ud_address(
            &AddressVector {
                dlid: 0xc001,
                remote_qpn: 0xff_ffff,
                ..av
            },
            1,
        );
        assert!(mc.is_multicast());
        assert_eq!(mc.remote_qpn, acm_proto::acm_mad::MULTICAST_QPN);
    }

    #[test]
    fn an_sa_send_goes_to_qp1_of_the_sm() {
        let mad = [0u8; acm_proto::mad::MAD_LEN];
        let dest = SaDest {
            dlid: 1,
            sl: 0,
            pkey_index: 2,
            remote_qpn: 1,
            remote_qkey: 0x8001_0000,
        };
        let s = sa_send(&dest, 2000, 2, &mad);
        assert_eq!((s.lid, s.sl, s.qpn, s.qkey), (1, 0, 1, 0x8001_0000));
        assert_eq!((s.pkey_index, s.timeout_ms, s.retries), (2, 2000, 2));
        assert_eq!(s.mad.len(), acm_proto::mad::MAD_LEN);
    }

    #[test]
    fn async_events_map_to_port_events() {
        let a = port_attrs(&active_port());
        assert_eq!(
            port_event(AsyncEventKind::PortActive, Some(a.clone())),
            Some(PortEvent::Active(a.clone()))
        );
        assert_eq!(
            port_event(AsyncEventKind::PortError, None),
            Some(PortEvent::Down)
        );
        assert_eq!(
            port_event(AsyncEventKind::ClientReregister, None),
            Some(PortEvent::ClientReregister)
        );
        assert_eq!(
            port_event(AsyncEventKind::SmChange, Some(a.clone())),
            Some(PortEvent::SmChange(a))
        );
        // No attributes (the re-query failed): nothing to tell but a port error.
        assert_eq!(port_event(AsyncEventKind::LidChange, None), None);
        assert_eq!(port_event(AsyncEventKind::Other(1), None), None);
    }
}
