//! Arrays across processes: a device array written into a `CaiIpcDescriptor` (plain bytes,
//! `export`) and opened from one in another process of the same machine (`open`) into an
//! owning `CaiArray` whose release lets go of the mapping. The descriptor's own rules (magic,
//! version, size, checksum, process token) live here; the device's part in `device::ipc`, the
//! array's rules in `validate` and the consumer's in `import`, each asked once.

use std::sync::Mutex;

use crate::abi::{
    CaiArray, CaiImportOptions, CaiIpcDescriptor, CaiPointerInfo, CAI_IPC_DESCRIPTOR_MAGIC,
    CAI_IPC_DESCRIPTOR_SIZE, CAI_IPC_DESCRIPTOR_VERSION, CAI_IPC_FLAGS_KNOWN, CAI_IPC_FLAG_EVENT,
    CAI_IPC_FLAG_READONLY, CAI_IPC_FLAG_STRIDES, CAI_IPC_HANDLE_SIZE, CAI_IPC_KIND_LEGACY, CAI_IPC_KIND_NONE,
    CAI_IPC_KIND_POOL, CAI_MAX_NDIM, CAI_MEMORY_CUDA, CAI_POINTER_CHECK_NEVER,
};
use crate::device::ipc as device_ipc;
use crate::device::pointer::extent_within_allocation;
use crate::status::{Error, Result, Status};
use crate::validate::{reserved_are_zero, stream_for_version, validate};

/// Bytes the checksum covers: every byte before it.
const CHECKSUMMED: usize = CAI_IPC_DESCRIPTOR_SIZE - 8;

/// FNV-1a 64's step, taken a native 64-bit word at a time instead of a byte: 191 steps for a
/// descriptor instead of 1,528 (the byte-wise hash was about a third of an export's time on the
/// fake driver). Each step is a bijection of the state, so a change to any one word (any flipped
/// bit or byte) changes the sum.
fn fnv1a64_words(bytes: &[u8]) -> u64 {
    bytes.chunks_exact(8).fold(0xcbf2_9ce4_8422_2325, |hash, word| {
        (hash ^ u64::from_ne_bytes(word.try_into().expect("8 bytes"))).wrapping_mul(0x0100_0000_01b3)
    })
}

fn checksum_of(descriptor: &CaiIpcDescriptor) -> u64 {
    fnv1a64_words(&descriptor.as_bytes()[..CHECKSUMMED])
}

/// This process's token, made once from the kernel's random bytes and again in a forked child
/// (its pid differs from the one the token was made in), so that a descriptor is known to come
/// from this very process, whatever the pid namespaces of the two.
fn process_token() -> [u8; 16] {
    static TOKEN: Mutex<Option<(u32, [u8; 16])>> = Mutex::new(None);
    let pid = std::process::id();
    let mut token = TOKEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match *token {
        Some((made_in, bytes)) if made_in == pid => bytes,
        _ => {
            let bytes = random_bytes(pid);
            *token = Some((pid, bytes));
            bytes
        }
    }
}

/// 16 random bytes from getrandom (else /dev/urandom; else the pid and the clock, which still
/// tell this process from its parent and its children).
fn random_bytes(pid: u32) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    // SAFETY: writes at most 16 bytes into the buffer.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got == bytes.len() as isize {
        return bytes;
    }
    if let Ok(mut urandom) = std::fs::File::open("/dev/urandom") {
        if std::io::Read::read_exact(&mut urandom, &mut bytes).is_ok() {
            return bytes;
        }
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    bytes[..4].copy_from_slice(&pid.to_ne_bytes());
    bytes[4..].copy_from_slice(&now.as_nanos().to_ne_bytes()[..12]);
    bytes
}

/// The descriptor of `array` (validated here) for another process: refused for memory that
/// cannot be shared (`device::ipc::export`), a mask, named descr fields, OpenCL memory and a
/// capturing stream. A zero-size array needs no driver: its descriptor has no handle.
pub fn export(array: &CaiArray) -> Result<CaiIpcDescriptor> {
    let validated = validate(array)?;
    if array.memory != CAI_MEMORY_CUDA {
        return Err(Error::new(
            Status::NotShareable,
            format!("array.memory is {}: only CUDA device memory (CAI_MEMORY_CUDA) can be exported to another process; an OpenCL buffer is shared through OpenCL", array.memory),
        ));
    }
    if !array.mask.is_null() {
        return Err(Error::new(
            Status::NotShareable,
            "array.mask is set: a descriptor carries one array; export the data and the mask as two descriptors and apply the mask after opening both",
        ));
    }
    if array.descr_count != 0 {
        return Err(Error::new(
            Status::NotShareable,
            format!("array.descr has {} named fields, which a descriptor does not carry: export the array without descr (its typestr keeps the item's size) and send the field list beside the descriptor", array.descr_count),
        ));
    }
    let mut out = CaiIpcDescriptor::zeroed();
    out.magic = CAI_IPC_DESCRIPTOR_MAGIC;
    out.version = CAI_IPC_DESCRIPTOR_VERSION;
    out.size = CAI_IPC_DESCRIPTOR_SIZE as u32;
    out.ndim = array.ndim;
    let rank = array.rank();
    out.shape[..rank].copy_from_slice(&array.shape[..rank]);
    if array.strides_given == 1 {
        out.flags |= CAI_IPC_FLAG_STRIDES;
        out.strides[..rank].copy_from_slice(&array.strides[..rank]);
    }
    if array.readonly == 1 {
        out.flags |= CAI_IPC_FLAG_READONLY;
    }
    out.typestr = array.typestr;
    // The typestr's bytes past its NUL are the producer's: a descriptor carries zeros there.
    let end = array.typestr_bytes().map_or(0, <[u8]>::len);
    out.typestr[end..].fill(0);
    out.dl_dtype = array.dl_dtype;
    out.process_token = process_token();
    if validated.element_count == 0 {
        out.kind = CAI_IPC_KIND_NONE;
    } else {
        let driver = crate::driver::driver()?;
        let exported =
            device_ipc::export(driver, array.data, validated.touched(), stream_for_version(array))?;
        out.kind = CAI_IPC_KIND_LEGACY;
        out.mem_handle = exported.mem_handle;
        out.offset = exported.offset;
        out.allocation_size = exported.allocation_size;
        out.device_uuid = exported.device_uuid;
        if let Some(event) = exported.event_handle {
            out.flags |= CAI_IPC_FLAG_EVENT;
            out.event_handle = event;
        }
    }
    out.checksum = checksum_of(&out);
    Ok(out)
}

/// Where the array of an opened descriptor is checked before anything is mapped: a base no
/// allocation has (page-aligned, inside the address space), the array `offset` bytes into it.
const STAND_IN_BASE: u64 = 1 << 40;

/// The descriptor's own rules, each a message naming the field, the value and the fix; then
/// the array it describes, with a stand-in base, against its allocation and `options`' rules
/// (read-only, byte order): everything but the driver's part, before any driver call.
fn checked(descriptor: &CaiIpcDescriptor, options: &CaiImportOptions) -> Result<CaiArray> {
    let refuse = |message: String| Err(Error::new(Status::IpcDescriptor, message));
    if descriptor.magic != CAI_IPC_DESCRIPTOR_MAGIC {
        return refuse(format!("descriptor.magic is {:#018x}, not CAI_IPC_DESCRIPTOR_MAGIC ({CAI_IPC_DESCRIPTOR_MAGIC:#018x}): these bytes are not an IPC descriptor cai_ipc_export wrote (or came from a machine of the other byte order); send its CAI_IPC_DESCRIPTOR_SIZE ({CAI_IPC_DESCRIPTOR_SIZE}) bytes unchanged", descriptor.magic));
    }
    if descriptor.version != CAI_IPC_DESCRIPTOR_VERSION {
        return refuse(format!("descriptor.version is {}; this libcai ({}) reads version {CAI_IPC_DESCRIPTOR_VERSION}: open it with a libcai that reads the exporter's version, or export it with this one", descriptor.version, env!("CARGO_PKG_VERSION")));
    }
    if descriptor.size != CAI_IPC_DESCRIPTOR_SIZE as u32 {
        return refuse(format!("descriptor.size is {}, not CAI_IPC_DESCRIPTOR_SIZE ({CAI_IPC_DESCRIPTOR_SIZE}) of version {CAI_IPC_DESCRIPTOR_VERSION}: the descriptor is corrupt; send the bytes cai_ipc_export wrote unchanged", descriptor.size));
    }
    let sum = checksum_of(descriptor);
    if descriptor.checksum != sum {
        return refuse(format!("descriptor.checksum is {:#018x} but its bytes hash to {sum:#018x}: the descriptor was changed or corrupted on the way; send the bytes cai_ipc_export wrote unchanged", descriptor.checksum));
    }
    reserved_are_zero("descriptor.reserved", &descriptor.reserved)
        .and_then(|()| reserved_are_zero("descriptor.reserved_head", &[descriptor.reserved_head]))
        .and_then(|()| reserved_are_zero("descriptor.reserved_half", &[descriptor.reserved_half]))
        .map_err(|e| Error::new(Status::IpcDescriptor, e.message))?;
    if descriptor.flags & !CAI_IPC_FLAGS_KNOWN != 0 {
        return refuse(format!("descriptor.flags is {:#x}: bits outside CAI_IPC_FLAG_* ({CAI_IPC_FLAGS_KNOWN:#x}) are not defined in version {CAI_IPC_DESCRIPTOR_VERSION}", descriptor.flags));
    }
    match descriptor.kind {
        CAI_IPC_KIND_NONE | CAI_IPC_KIND_LEGACY => {}
        CAI_IPC_KIND_POOL => return refuse(format!("descriptor.kind is CAI_IPC_KIND_POOL ({CAI_IPC_KIND_POOL}), which this libcai does not open (it never writes it): memory of a stream-ordered pool travels with the pool's file descriptor, which a descriptor cannot carry")),
        other => return refuse(format!("descriptor.kind is {other}, not CAI_IPC_KIND_NONE (0) or CAI_IPC_KIND_LEGACY (1)")),
    }
    if descriptor.process_token == process_token() {
        return refuse("the descriptor was exported by this very process (its process_token is this process's): a process cannot open its own IPC handles (the CUDA driver refuses); use the array itself".to_string());
    }
    if !(0..=CAI_MAX_NDIM as i32).contains(&descriptor.ndim) {
        return refuse(format!(
            "descriptor.ndim is {}, outside 0 to CAI_MAX_NDIM ({CAI_MAX_NDIM})",
            descriptor.ndim
        ));
    }
    let mut array = CaiArray::zeroed();
    array.version = 3;
    array.ndim = descriptor.ndim;
    let rank = array.rank();
    array.shape[..rank].copy_from_slice(&descriptor.shape[..rank]);
    if descriptor.flags & CAI_IPC_FLAG_STRIDES != 0 {
        array.strides_given = 1;
        array.strides[..rank].copy_from_slice(&descriptor.strides[..rank]);
    }
    array.readonly = u32::from(descriptor.flags & CAI_IPC_FLAG_READONLY != 0);
    array.typestr = descriptor.typestr;
    array.dl_dtype = descriptor.dl_dtype;
    if descriptor.kind == CAI_IPC_KIND_NONE {
        let validated = validate(&array)?;
        if validated.element_count != 0 {
            return refuse(format!("descriptor.kind is CAI_IPC_KIND_NONE (no allocation) but its array has {} elements: the descriptor is corrupt", validated.element_count));
        }
    } else {
        if descriptor.offset >= descriptor.allocation_size {
            return refuse(format!(
                "descriptor.offset {} is not inside its allocation of {} bytes: the descriptor is corrupt",
                descriptor.offset, descriptor.allocation_size
            ));
        }
        array.data = STAND_IN_BASE + descriptor.offset;
        let validated = validate(&array)?;
        let allocation = CaiPointerInfo {
            allocation_base: STAND_IN_BASE,
            allocation_size: descriptor.allocation_size,
            ..Default::default()
        };
        extent_within_allocation(array.data, validated.extent, &allocation).map_err(|e| {
            Error::new(
                Status::IpcDescriptor,
                format!("the descriptor's array reaches outside its allocation (corrupt): {}", e.message),
            )
        })?;
    }
    // The consumer's rules on the array (read-only, byte order, the options' values), without
    // the pointer check, which runs on the mapped memory.
    crate::import::import(&array, &CaiImportOptions { pointer_check: CAI_POINTER_CHECK_NEVER, ..*options })?;
    Ok(array)
}

/// What an opened array's release needs: the handle of the allocation it holds.
struct Held {
    mem_handle: [u8; CAI_IPC_HANDLE_SIZE],
}

/// An opened array's release: lets go of its hold on the mapping (the last closes it).
unsafe extern "C" fn release_opened(array: *mut CaiArray) {
    // SAFETY: `owner` is the Held that `open` boxed for this array, taken back once: a release
    // runs exactly once.
    let held = unsafe { Box::from_raw((*array).owner.cast::<Held>()) };
    device_ipc::close(&held.mem_handle);
}

/// The array of `descriptor`, exported by another process, mapped into this one on the device
/// of the descriptor's UUID and ordered after the exporter's pending work as `options` say (as
/// `cai_import` orders it after a producer's stream): an owning struct whose release lets go of
/// the mapping. A zero-size array's descriptor opens with no driver.
pub fn open(descriptor: &CaiIpcDescriptor, options: &CaiImportOptions) -> Result<CaiArray> {
    let mut array = checked(descriptor, options)?;
    if descriptor.kind == CAI_IPC_KIND_NONE {
        return Ok(array);
    }
    let driver = crate::driver::driver()?;
    let event = (descriptor.flags & CAI_IPC_FLAG_EVENT != 0).then_some(&descriptor.event_handle);
    let base = device_ipc::open(
        driver,
        &descriptor.device_uuid,
        &descriptor.mem_handle,
        event,
        (options.consumer_stream, options.sync_mode),
    )?;
    array.data = base + descriptor.offset;
    // The import's pointer check as the options ask, on the mapped memory (nothing to sync:
    // the array has no stream of this process).
    if let Err(failed) = crate::import::import(&array, options) {
        device_ipc::close(&descriptor.mem_handle);
        return Err(failed);
    }
    array.owner = Box::into_raw(Box::new(Held { mem_handle: descriptor.mem_handle })).cast();
    array.release = Some(release_opened);
    Ok(array)
}

/// How many arrays of this process hold the allocation `descriptor` names (0: not open here).
pub fn open_count(descriptor: &CaiIpcDescriptor) -> u64 {
    device_ipc::holders(&descriptor.mem_handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One word is FNV-1a's step on it: the offset basis xor the word, times the prime; a
    /// change of any one byte of a descriptor changes its sum.
    #[test]
    fn the_checksum_is_fnv1a_by_words_and_sees_every_byte() {
        assert_eq!(fnv1a64_words(&[]), 0xcbf2_9ce4_8422_2325);
        let one = (0xcbf2_9ce4_8422_2325u64 ^ 7).wrapping_mul(0x0100_0000_01b3);
        assert_eq!(fnv1a64_words(&7u64.to_ne_bytes()), one);
        let descriptor = CaiIpcDescriptor::zeroed();
        let sum = checksum_of(&descriptor);
        for at in 0..CHECKSUMMED {
            let mut bytes = *descriptor.as_bytes();
            bytes[at] ^= 0x80;
            assert_ne!(checksum_of(&CaiIpcDescriptor::from_bytes(&bytes)), sum, "byte {at}");
        }
    }

    #[test]
    fn the_token_is_made_once_per_process() {
        assert_eq!(process_token(), process_token());
        assert_ne!(process_token(), [0; 16]);
    }
}
