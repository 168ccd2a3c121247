//! Arrays across processes, safely: [`IpcDescriptor`], written by
//! [`ArrayRef::ipc_export`](super::ArrayRef::ipc_export) and opened in another process by
//! [`Array::ipc_open`](super::Array::ipc_open).

use crate::abi::{CaiIpcDescriptor, CAI_IPC_DESCRIPTOR_SIZE};
use crate::status::{Error, Result, Status};

/// A device array as `CAI_IPC_DESCRIPTOR_SIZE` plain bytes that another process on this machine
/// opens ([`Array::ipc_open`](super::Array::ipc_open)): send [`as_bytes`](Self::as_bytes) by any
/// channel, and read them back with [`from_bytes`](Self::from_bytes).
///
/// The lifetime rule: the exporting process keeps the memory allocated, and itself alive,
/// while any importer uses it (see `CaiIpcDescriptor`).
///
/// ```
/// // A zero-size array travels with no allocation and no driver.
/// let array = cai::Array::builder("<f4", &[0], 0).build()?;
/// let descriptor = array.ipc_export()?;
/// let sent: Vec<u8> = descriptor.as_bytes().to_vec();
/// let received = cai::IpcDescriptor::from_bytes(&sent)?;
/// assert_eq!(received.as_bytes(), descriptor.as_bytes());
/// // Opened in its own process it is refused: use the array itself there.
/// let refused = cai::Array::ipc_open(&received, &cai::ImportOptions::new()).unwrap_err();
/// assert_eq!(refused.status(), cai::Status::IpcDescriptor);
/// # Ok::<(), cai::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct IpcDescriptor {
    raw: CaiIpcDescriptor,
}

impl IpcDescriptor {
    /// The descriptor's bytes, as they are sent.
    pub fn as_bytes(&self) -> &[u8; CAI_IPC_DESCRIPTOR_SIZE] {
        self.raw.as_bytes()
    }

    /// A descriptor from the bytes another process sent: refused
    /// ([`Status::IpcDescriptor`]) where they are not `CAI_IPC_DESCRIPTOR_SIZE` long; what they
    /// hold is checked when it is opened.
    pub fn from_bytes(bytes: &[u8]) -> Result<IpcDescriptor> {
        let bytes: &[u8; CAI_IPC_DESCRIPTOR_SIZE] = bytes.try_into().map_err(|_| {
            Error::new(
                Status::IpcDescriptor,
                format!(
                    "an IPC descriptor is {CAI_IPC_DESCRIPTOR_SIZE} bytes, not {}: send the bytes of as_bytes() whole",
                    bytes.len()
                ),
            )
        })?;
        Ok(IpcDescriptor { raw: CaiIpcDescriptor::from_bytes(bytes) })
    }

    /// The C struct.
    pub fn as_raw(&self) -> &CaiIpcDescriptor {
        &self.raw
    }

    /// A descriptor of the C struct (checked when it is opened).
    pub fn from_raw(raw: CaiIpcDescriptor) -> IpcDescriptor {
        IpcDescriptor { raw }
    }
}

impl std::fmt::Debug for IpcDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcDescriptor")
            .field("version", &self.raw.version)
            .field("kind", &self.raw.kind)
            .field("shape", &&self.raw.shape[..usize::try_from(self.raw.ndim).unwrap_or(0).min(64)])
            .field("offset", &self.raw.offset)
            .finish_non_exhaustive()
    }
}
