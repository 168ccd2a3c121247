//! Device operations on top of the driver's typed calls: pointer attributes and bounds,
//! consumer sync, producer stream joins, and the event pool they share.

pub(crate) mod context;
pub(crate) mod events;
pub(crate) mod opencl;
pub(crate) mod pointer;
pub(crate) mod sync;
