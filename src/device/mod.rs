//! Device operations on top of the driver's typed calls: pointer attributes and bounds,
//! consumer sync, producer stream joins, releases deferred until a stream has passed a point,
//! and the event pool they share; `memory` is the seam the layers above ask, one
//! implementation per memory kind.

pub(crate) mod context;
pub(crate) mod deferred;
pub(crate) mod events;
pub(crate) mod ipc;
pub(crate) mod memory;
pub(crate) mod opencl;
pub(crate) mod pointer;
pub(crate) mod sync;
