//! The negotiation: which protocol reads an object (a dict, a cai.Array, its type's C-level
//! CAI table, its type's DLPack exchange table, a numpy array's fields, its attributes), and
//! the one import of what the reader read. Python (`cai.from_object`) and C
//! (`cai_python_from_object`, `cai_python_view`, `cai_python_view_or_own`) all run
//! `pipeline::import_object`. By job, each calling only those after it:
//! - `pipeline`: the route's protocols tried in turn, in one dispatch to the readers
//!   (python/src/read/), which hold what they read as the caller asked (crate::import);
//! - `classify`: the route of protocols for an object, from its type's facts;
//! - `type_facts`: what is known of a type, found once per type (fixed facts only).

pub mod classify;
pub mod pipeline;
pub mod type_facts;
