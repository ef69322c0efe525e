//! What is wrong with a description: one variant per kind of problem, each naming the
//! key, so a test (or a person editing a file) sees where to look.

/// What [`FabricSpec::parse`](super::FabricSpec::parse) found wrong. Every message names
/// the key (as a path like `hosts[1] (node2).hcas[0].ports[0].lid`) or, for syntax
/// errors, the line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// Not TOML, a key of the wrong type, or an unknown key; toml's message (line,
    /// column, a caret under the offending text) is kept whole.
    #[error("{0}")]
    Syntax(String),
    /// A LID (or the end of its LMC range) outside the unicast range 1..=0xBFFF, or not
    /// aligned to its LMC.
    #[error("{field}: LID {lid} ({lid:#06x}) {why}")]
    BadLid {
        /// Where.
        field: String,
        /// The LID.
        lid: u16,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Two ports whose LID ranges overlap.
    #[error("{field}: LID {lid} is already used by {other}")]
    DuplicateLid {
        /// The later port.
        field: String,
        /// The first LID they share.
        lid: u16,
        /// The earlier port.
        other: String,
    },
    /// Two hosts with one name.
    #[error("{field}: host name {name:?} is already used by hosts[{first}]")]
    DuplicateHost {
        /// The later host.
        field: String,
        /// The name.
        name: String,
        /// Index of the first host with it.
        first: usize,
    },
    /// An IP address on an HCA or port the host does not have.
    #[error("{field}: host {host:?} has no port {port} on HCA {hca}")]
    MissingPort {
        /// The IP entry.
        field: String,
        /// The host name.
        host: String,
        /// The HCA index given.
        hca: usize,
        /// The port number given.
        port: u8,
    },
    /// `sm.lid` is no port's LID, so SA MADs would go nowhere.
    #[error("sm.lid: no InfiniBand port has LID {0}")]
    SmLidNotFound(u16),
    /// Any other value out of range or inconsistent.
    #[error("{field}: {message}")]
    Invalid {
        /// Where.
        field: String,
        /// What is wrong.
        message: String,
    },
}
