//! Async events of a device, as `ibv_get_async_event` reports them, reduced to what the
//! daemon acts on. The raw event number is mapped here, so an event type this crate
//! does not know (a newer kernel's) is carried as [`AsyncEventKind::Other`] rather than
//! misread.

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEventKind {
    /// IBV_EVENT_DEVICE_FATAL: the device is unusable.
    DeviceFatal,
    /// IBV_EVENT_PORT_ACTIVE.
    PortActive,
    /// IBV_EVENT_PORT_ERR: the port went down.
    PortError,
    /// IBV_EVENT_LID_CHANGE.
    LidChange,
    /// IBV_EVENT_PKEY_CHANGE.
    PkeyChange,
    /// IBV_EVENT_SM_CHANGE.
    SmChange,
    /// IBV_EVENT_CLIENT_REREGISTER.
    ClientReregister,
    /// IBV_EVENT_GID_CHANGE.
    GidChange,
    /// IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR or IBV_EVENT_QP_ACCESS_ERR: the QP
    /// went to the error state and does no more work.
    QpError,
    /// IBV_EVENT_CQ_ERR: the CQ overran; completions were lost.
    CqError,
    /// Any other event number (SRQ and path-migration events among them).
    Other(i32),
}

impl AsyncEventKind {
    /// The kind for a raw `ibv_event_type` number.
    #[must_use]
    pub fn from_raw(n: i32) -> Self {
        match n {
            0 => Self::CqError,
            1..=3 => Self::QpError,
            8 => Self::DeviceFatal,
            9 => Self::PortActive,
            10 => Self::PortError,
            11 => Self::LidChange,
            12 => Self::PkeyChange,
            13 => Self::SmChange,
            17 => Self::ClientReregister,
            18 => Self::GidChange,
            other => Self::Other(other),
        }
    }

    /// Whether the event names a port (its `element` is a port number).
    #[must_use]
    pub fn is_port_event(self) -> bool {
        matches!(
            self,
            Self::PortActive
                | Self::PortError
                | Self::LidChange
                | Self::PkeyChange
                | Self::SmChange
                | Self::ClientReregister
                | Self::GidChange
        )
    }
}

/// One async event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncEvent {
    /// What happened.
    pub kind: AsyncEventKind,
    /// The port, for port events; 0 otherwise.
    pub port: u8,
    /// For QP and CQ events, the key the endpoint owning the QP or CQ was opened with
    /// (`UdConfig::key` of the `verbs` module, which only the `verbs` feature builds).
    pub key: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_numbers_map_to_the_events_the_daemon_handles() {
        assert_eq!(AsyncEventKind::from_raw(9), AsyncEventKind::PortActive);
        assert_eq!(AsyncEventKind::from_raw(10), AsyncEventKind::PortError);
        assert_eq!(
            AsyncEventKind::from_raw(17),
            AsyncEventKind::ClientReregister
        );
        assert_eq!(AsyncEventKind::from_raw(8), AsyncEventKind::DeviceFatal);
        assert!(!AsyncEventKind::DeviceFatal.is_port_event());
        assert!(AsyncEventKind::GidChange.is_port_event());
        // QP and CQ errors are told apart; a number from a future kernel is carried
        // as it is.
        assert_eq!(AsyncEventKind::from_raw(0), AsyncEventKind::CqError);
        assert_eq!(AsyncEventKind::from_raw(1), AsyncEventKind::QpError);
        assert_eq!(AsyncEventKind::from_raw(3), AsyncEventKind::QpError);
        assert_eq!(AsyncEventKind::from_raw(4), AsyncEventKind::Other(4));
        assert_eq!(AsyncEventKind::from_raw(99), AsyncEventKind::Other(99));
        assert!(!AsyncEventKind::Other(99).is_port_event());
    }
}
