//! Framing requests out of a byte stream, as the reference daemon does
//! (docs/protocol/client-messages.md §11).
//!
//! A daemon reads the 16-byte header, asks [`request_len`] how long the whole request
//! is, reads the rest, and checks the whole message with [`check_request`]. A header no
//! request can have (a version other than 1, an operation other than RESOLVE,
//! PERF_QUERY or EP_QUERY, a length under 16 or over 592) ends the connection without a
//! reply; [`FrameError`] says which. A client frames replies with [`reply_len`].

use super::{ACM_VERSION, Direction, HEADER_LEN, HeaderPacket, MAX_REQUEST_LEN, Operation};
use core::fmt;

/// Why bytes cannot be a request: the connection is closed without a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer than 16 bytes.
    ShortHeader,
    /// `version` ≠ 1.
    BadVersion(u8),
    /// The opcode's operation is not RESOLVE, PERF_QUERY or EP_QUERY.
    UnknownOpcode(u8),
    /// The length field does not match the bytes received, is under 16, or exceeds 592.
    BadLength {
        /// What the header says.
        declared: u16,
        /// What arrived.
        received: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ShortHeader => f.write_str("message shorter than the 16-byte header"),
            Self::BadVersion(v) => write!(f, "unsupported version {v}"),
            Self::UnknownOpcode(o) => write!(f, "unknown opcode {o:#04x}"),
            Self::BadLength { declared, received } => {
                write!(f, "length field {declared} but {received} bytes received")
            }
        }
    }
}

impl core::error::Error for FrameError {}

/// Checks the header at the start of `bytes` and returns its length field, read in the
/// request's byte order (host order for opcode 0x01 exactly, big-endian otherwise).
#[inline]
fn checked_header(bytes: &[u8]) -> Result<u16, FrameError> {
    if bytes.len() < HEADER_LEN {
        return Err(FrameError::ShortHeader);
    }
    let hdr = HeaderPacket::new_unchecked(&bytes[..HEADER_LEN]);
    if hdr.version() != ACM_VERSION {
        return Err(FrameError::BadVersion(hdr.version()));
    }
    let op = hdr.opcode().operation();
    if op != Operation::RESOLVE && op != Operation::PERF_QUERY && op != Operation::EP_QUERY {
        return Err(FrameError::UnknownOpcode(hdr.opcode().0));
    }
    Ok(hdr.length(Direction::Request))
}

/// The length of the whole request whose header starts `header`, if a request can have
/// that header: what a stream reader must have before handing the message on.
///
/// # Errors
/// A short header, a bad version or operation, or a length under 16 or over 592
/// (`received` is then the header's length).
#[inline]
pub fn request_len(header: &[u8]) -> Result<usize, FrameError> {
    let declared = checked_header(header)?;
    let len = usize::from(declared);
    if (HEADER_LEN..=MAX_REQUEST_LEN).contains(&len) {
        Ok(len)
    } else {
        Err(FrameError::BadLength {
            declared,
            received: header.len().min(HEADER_LEN),
        })
    }
}

/// The length of the whole reply whose header starts `header`: what a client must have
/// read before the reply is whole. A reply's length is read in the reply's byte order
/// (host order for a RESOLVE reply, ACK bit or not; big-endian otherwise). The
/// version and operation are not judged here: a client matches the reply to its request
/// by tid and judges it then, so a framed reply is never lost to a bad header.
///
/// # Errors
/// [`FrameError::ShortHeader`] for fewer than 16 bytes; [`FrameError::BadLength`] for a
/// length under 16, after which nothing on the stream can be framed.
#[inline]
pub fn reply_len(header: &[u8]) -> Result<usize, FrameError> {
    if header.len() < HEADER_LEN {
        return Err(FrameError::ShortHeader);
    }
    let declared = HeaderPacket::new_unchecked(&header[..HEADER_LEN]).length(Direction::Response);
    let len = usize::from(declared);
    if len < HEADER_LEN {
        return Err(FrameError::BadLength {
            declared,
            received: HEADER_LEN,
        });
    }
    Ok(len)
}

/// Checks a whole request the way the reference frames one
/// (docs/protocol/client-messages.md §11).
///
/// # Errors
/// The reason to close: a short header, a version other than 1, an unknown operation,
/// or a length field that disagrees with the bytes (or exceeds 592).
#[inline]
pub fn check_request(bytes: &[u8]) -> Result<(), FrameError> {
    let declared = checked_header(bytes)?;
    if usize::from(declared) != bytes.len() || bytes.len() > MAX_REQUEST_LEN {
        return Err(FrameError::BadLength {
            declared,
            received: bytes.len(),
        });
    }
    Ok(())
}

/// Checks a whole request as [`check_request`] does and returns its header, parsed:
/// a daemon parses a request's header once, here, and hands the typed header on.
///
/// # Errors
/// As [`check_request`].
#[inline]
pub fn parse_request(bytes: &[u8]) -> Result<super::HeaderRepr, FrameError> {
    check_request(bytes)?;
    let hdr = HeaderPacket::new_unchecked(&bytes[..HEADER_LEN]);
    Ok(super::HeaderRepr {
        version: hdr.version(),
        opcode: hdr.opcode(),
        status: hdr.status(),
        data: hdr.data(),
        length: bytes.len() as u16,
        tid: hdr.tid(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: u8, opcode: u8, len: u16) -> [u8; 16] {
        let mut h = [0u8; 16];
        h[0] = version;
        h[1] = opcode;
        let raw = if opcode == 1 {
            len.to_ne_bytes()
        } else {
            len.to_be_bytes()
        };
        h[6..8].copy_from_slice(&raw);
        h
    }

    #[test]
    fn request_len_reads_the_length_in_the_request_byte_order() {
        assert_eq!(request_len(&header(1, 1, 88)), Ok(88));
        assert_eq!(request_len(&header(1, 2, 16)), Ok(16));
        assert_eq!(request_len(&header(1, 3, 16)), Ok(16));
        // 0x81 is a RESOLVE whose length is big-endian.
        assert_eq!(request_len(&header(1, 0x81, 88)), Ok(88));
        assert_eq!(
            request_len(&header(2, 1, 88)),
            Err(FrameError::BadVersion(2))
        );
        assert_eq!(
            request_len(&header(1, 4, 16)),
            Err(FrameError::UnknownOpcode(4))
        );
        assert!(matches!(
            request_len(&header(1, 1, 15)),
            Err(FrameError::BadLength { declared: 15, .. })
        ));
        assert!(matches!(
            request_len(&header(1, 1, 593)),
            Err(FrameError::BadLength { declared: 593, .. })
        ));
        assert_eq!(request_len(&[1, 1]), Err(FrameError::ShortHeader));
    }

    #[test]
    fn reply_len_reads_the_length_in_the_reply_byte_order() {
        let reply = |opcode: u8, len: u16| {
            let mut h = [0u8; 16];
            let mut p = HeaderPacket::new_unchecked(&mut h[..]);
            p.set_version(ACM_VERSION);
            p.set_opcode(super::super::Opcode(opcode));
            p.set_length(Direction::Response, len);
            h
        };
        assert_eq!(reply_len(&reply(0x81, 160)), Ok(160));
        assert_eq!(reply_len(&reply(0x82, 4096)), Ok(4096));
        // A RESOLVE reply's length is in host order, another's big-endian.
        assert_eq!(reply_len(&header(1, 1, 88)), Ok(88));
        assert_eq!(reply_len(&header(1, 2, 0x0100)), Ok(0x0100));
        // Version and operation are the caller's to judge.
        assert_eq!(reply_len(&header(7, 9, 16)), Ok(16));
        assert!(matches!(
            reply_len(&header(1, 1, 15)),
            Err(FrameError::BadLength { declared: 15, .. })
        ));
        assert_eq!(reply_len(&[1, 1, 0]), Err(FrameError::ShortHeader));
    }

    #[test]
    fn check_request_follows_spec_1_11() {
        let ok = header(1, 2, 16);
        assert_eq!(check_request(&ok), Ok(()));
        assert_eq!(check_request(&ok[..15]), Err(FrameError::ShortHeader));
        assert_eq!(
            check_request(&header(2, 2, 16)),
            Err(FrameError::BadVersion(2))
        );
        assert_eq!(
            check_request(&header(1, 5, 16)),
            Err(FrameError::UnknownOpcode(5))
        );
        // RESOLVE lengths are host order; 16 big-endian reads as 4096.
        let mut resolve = header(1, 1, 16);
        resolve[6..8].copy_from_slice(&16u16.to_be_bytes());
        assert!(matches!(
            check_request(&resolve),
            Err(FrameError::BadLength { .. })
        ));
        assert_eq!(check_request(&header(1, 1, 16)), Ok(()));
    }

    #[test]
    fn parse_request_returns_the_checked_header() {
        let mut perf = header(1, 2, 16);
        perf[4] = 1;
        perf[5] = 7;
        let hdr = parse_request(&perf).unwrap();
        assert_eq!((hdr.version, hdr.opcode.0, hdr.length), (1, 2, 16));
        assert_eq!(hdr.data, [0, 1, 7]);
        // A RESOLVE's length in host order, as check_request reads it.
        assert_eq!(parse_request(&header(1, 1, 16)).unwrap().length, 16);
        assert_eq!(
            parse_request(&header(1, 5, 16)),
            Err(FrameError::UnknownOpcode(5))
        );
        assert_eq!(parse_request(&perf[..15]), Err(FrameError::ShortHeader));
    }
}
