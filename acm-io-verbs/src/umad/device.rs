//! One umad device (`/dev/infiniband/umadN`, one per port) with the daemon's SA agent
//! registered on it.
//!
//! The descriptor is non-blocking: [`UmadDevice::recv`] returns `None` when nothing is
//! queued, so it can sit in a mio poller (it implements [`AsFd`]). Sends go out with
//! the kernel's timeout and retries; a send that gets no response comes back through
//! `recv` with a non-zero status, and nothing is retried here.

use super::error::UmadError;
use super::header::{HEADER_LEN, UserMadHeader};
use super::register::{self, AgentRequest};
use acm_proto::mad::MAD_LEN;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where and how to send one MAD.
#[derive(Debug, Clone, Copy)]
pub struct MadSend<'a> {
    /// Destination LID (the SM's).
    pub lid: u16,
    /// Service level.
    pub sl: u8,
    /// Remote QPN (1 for the SA).
    pub qpn: u32,
    /// Remote Q_Key.
    pub qkey: u32,
    /// Pkey index to send on.
    pub pkey_index: u16,
    /// Kernel timeout per try, in ms (0: no response expected).
    pub timeout_ms: u32,
    /// Kernel retries.
    pub retries: u32,
    /// The MAD.
    pub mad: &'a [u8],
}

/// A MAD read from the device.
#[derive(Debug)]
pub struct MadRecv<'a> {
    /// The header the kernel wrote.
    pub header: UserMadHeader,
    /// The MAD: a response (status 0), or one of our sends given back (status set).
    pub mad: &'a [u8],
}

/// An open umad device with the SA agent registered.
#[derive(Debug)]
pub struct UmadDevice {
    file: File,
    path: PathBuf,
    agent_id: u32,
    buf: Vec<u8>,
}

impl UmadDevice {
    /// Opens `path` and registers the SA client agent that also receives the SA's
    /// Reports ([`AgentRequest::SA_REPORTS`]); when the kernel refuses that agent (the
    /// Report method already has an agent on this port), opens it again with the plain
    /// agent. The flag says whether Reports will arrive.
    ///
    /// # Errors
    /// As [`UmadDevice::open`].
    pub fn open_with_reports(path: &Path) -> Result<(Self, bool), UmadError> {
        match Self::open_as(path, AgentRequest::SA_REPORTS) {
            Ok(d) => Ok((d, true)),
            Err(UmadError::Register { .. }) => Self::open(path).map(|d| (d, false)),
            Err(e) => Err(e),
        }
    }

    /// Opens `path` (non-blocking, close-on-exec) and registers the SA client agent.
    ///
    /// # Errors
    /// The node is missing or not accessible, or the kernel refuses the agent.
    pub fn open(path: &Path) -> Result<Self, UmadError> {
        Self::open_as(path, AgentRequest::SA)
    }

    fn open_as(path: &Path, req: AgentRequest) -> Result<Self, UmadError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|source| UmadError::Open {
                path: path.to_owned(),
                source,
            })?;
        let agent_id = register_agent(&file, req).map_err(|source| UmadError::Register {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self {
            file,
            path: path.to_owned(),
            agent_id,
            buf: vec![0; HEADER_LEN + MAD_LEN],
        })
    }

    /// The device node.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SA agent's id.
    #[must_use]
    pub fn agent_id(&self) -> u32 {
        self.agent_id
    }

    /// Hands one MAD to the kernel.
    ///
    /// # Errors
    /// The kernel refused it (the errno is what a handler should see as the send's
    /// status).
    pub fn send(&mut self, send: &MadSend<'_>) -> io::Result<()> {
        let header = UserMadHeader {
            agent_id: self.agent_id,
            timeout_ms: send.timeout_ms,
            retries: send.retries,
            length: (HEADER_LEN + send.mad.len()) as u32,
            qpn: send.qpn,
            qkey: send.qkey,
            lid: send.lid,
            sl: send.sl,
            pkey_index: send.pkey_index,
            ..UserMadHeader::default()
        };
        let mut frame = [0u8; HEADER_LEN + MAD_LEN];
        let bytes: &[u8] = if send.mad.len() <= MAD_LEN {
            header.emit(&mut frame);
            frame[HEADER_LEN..HEADER_LEN + send.mad.len()].copy_from_slice(send.mad);
            &frame[..HEADER_LEN + send.mad.len()]
        } else {
            self.buf.resize(HEADER_LEN + send.mad.len(), 0);
            header.emit(&mut self.buf);
            self.buf[HEADER_LEN..].copy_from_slice(send.mad);
            &self.buf
        };
        loop {
            match self.file.write(bytes) {
                Ok(n) if n == bytes.len() => return Ok(()),
                Ok(n) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        format!("umad took {n} of {} bytes", bytes.len()),
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next MAD the kernel has for us, or `None` when there is none.
    ///
    /// # Errors
    /// The read failed for another reason than "nothing queued".
    pub fn recv(&mut self) -> io::Result<Option<MadRecv<'_>>> {
        loop {
            match self.file.read(&mut self.buf) {
                Ok(n) => {
                    let Some(header) = UserMadHeader::parse(&self.buf[..n]) else {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("umad returned {n} bytes, less than its header"),
                        ));
                    };
                    return Ok(Some(MadRecv {
                        header,
                        mad: &self.buf[HEADER_LEN..n],
                    }));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A reassembled RMPP response larger than the buffer: the kernel wrote
                // the header with the length it needs and keeps the MAD queued.
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    let need = UserMadHeader::parse(&self.buf)
                        .map_or(0, |h| h.length as usize)
                        .max(HEADER_LEN + MAD_LEN);
                    if need <= self.buf.len() {
                        return Err(e);
                    }
                    self.buf.resize(need, 0);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The agent is unregistered before the descriptor closes: closing alone would drop
/// it too, but saying so keeps the kernel's bookkeeping and ours in step when a
/// device's agents go one by one (hot removal). A device already gone refuses, which
/// changes nothing.
impl Drop for UmadDevice {
    fn drop(&mut self) {
        let mut id = Aligned(self.agent_id.to_ne_bytes());
        let _ = ioctl_bytes(&self.file, register::IOCTL_UNREGISTER_AGENT, &mut id.0);
    }
}

impl AsFd for UmadDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// Registers `req` on `file`: REGISTER_AGENT2 (which also turns on the pkey-index
/// header), or on kernels without it ENABLE_PKEY and REGISTER_AGENT.
fn register_agent(file: &File, req: AgentRequest) -> io::Result<u32> {
    let mut r2 = Aligned(req.reg_req2());
    match ioctl_bytes(file, register::IOCTL_REGISTER_AGENT2, &mut r2.0) {
        Ok(()) => return Ok(register::agent_id(&r2.0)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOTTY)) => {}
        Err(e) => return Err(e),
    }
    ioctl_no_arg(file, register::IOCTL_ENABLE_PKEY)?;
    let mut r1 = Aligned(req.reg_req());
    ioctl_bytes(file, register::IOCTL_REGISTER_AGENT, &mut r1.0)?;
    Ok(register::agent_id(&r1.0))
}

/// Request structures are passed 8-byte aligned, as the C structures would be.
#[repr(C, align(8))]
struct Aligned<const N: usize>([u8; N]);

/// An ioctl whose argument is a request structure of exactly the size encoded in
/// `request`.
fn ioctl_bytes<const N: usize>(file: &File, request: u32, arg: &mut [u8; N]) -> io::Result<()> {
    debug_assert_eq!(((request >> 16) & 0x3fff) as usize, N);
    // SAFETY: the descriptor is open for as long as `file` is borrowed; `arg` is a
    // valid, initialized, writable buffer of exactly the size the request number
    // encodes, so the kernel's copy in and out stays inside it.
    let r = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            request as libc::Ioctl,
            arg.as_mut_ptr().cast::<libc::c_void>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// An ioctl without an argument.
fn ioctl_no_arg(file: &File, request: u32) -> io::Result<()> {
    // SAFETY: the descriptor is open for as long as `file` is borrowed, and the
    // request (size 0) reads no argument.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), request as libc::Ioctl, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_device_node_names_the_module() {
        let e = UmadDevice::open(Path::new("/nonexistent/infiniband/umad0")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot open /nonexistent/infiniband/umad0: No such file or directory \
             (os error 2) (is the ib_umad module loaded?)"
        );
    }

    #[test]
    fn a_file_that_is_not_a_umad_device_is_refused_at_registration() {
        let dir = std::env::temp_dir().join(format!("acm-umad-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("umad0");
        std::fs::write(&path, b"").unwrap();
        let e = UmadDevice::open(&path).unwrap_err();
        assert!(matches!(e, UmadError::Register { .. }), "{e}");
        assert!(
            e.to_string().starts_with(&format!(
                "cannot register an SA agent on {}: ",
                path.display()
            )),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
