//! Device operations on top of the driver: pointer attributes and bounds, consumer sync,
//! producer stream joins, and the event pool they share.

pub(crate) mod context;
pub mod pointer;
pub mod sync;
