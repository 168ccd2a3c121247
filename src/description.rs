//! A CaiArray together with what its pointers point to: the descr fields and the mask's own
//! description. A binding that reads a producer's description (a dict, say) builds one, and the
//! struct it hands to C is then complete and valid for as long as the description lives: the
//! wiring of `descr` and `mask` is done here, once, not by each binding.

use std::ops::DerefMut;

use crate::abi::{CaiArray, CaiField};

/// A complete, owning description. `B` holds the struct on the heap (a `Box<CaiArray>`, or a
/// binding's pooled box): its address never moves, so the parent's `mask` pointer stays valid.
pub struct Description<B: DerefMut<Target = CaiArray>> {
    array: B,
    fields: Box<[CaiField]>,
    mask: Option<Box<Description<B>>>,
}

impl<B: DerefMut<Target = CaiArray>> Description<B> {
    /// Takes `fields` and `mask` and points `array`'s `descr` (with `descr_count`) and `mask`
    /// at them. `array`'s other fields are left as they are.
    pub fn new(mut array: B, fields: Vec<CaiField>, mask: Option<Description<B>>) -> Description<B> {
        let fields = fields.into_boxed_slice();
        array.descr = if fields.is_empty() { std::ptr::null() } else { fields.as_ptr() };
        array.descr_count = fields.len() as u32;
        let mask = mask.map(Box::new);
        array.mask = mask.as_ref().map_or(std::ptr::null(), |mask| &*mask.array as *const CaiArray);
        Description { array, fields, mask }
    }

    /// A struct whose pointers (if any) point into memory someone else keeps valid.
    pub fn borrowing(array: B) -> Description<B> {
        Description { array, fields: Box::new([]), mask: None }
    }

    /// The struct, its pointers into this description.
    pub fn array(&self) -> &CaiArray {
        &self.array
    }

    /// The struct, for what may write to it while nothing else reads it (a release callback).
    pub fn array_mut(&mut self) -> &mut CaiArray {
        &mut self.array
    }

    /// The descr fields this description owns (empty when the struct's are someone else's).
    pub fn fields(&self) -> &[CaiField] {
        &self.fields
    }

    /// The mask's description, when this one owns it.
    pub fn mask(&self) -> Option<&Description<B>> {
        self.mask.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> CaiField {
        let mut field =
            CaiField { name: [0; crate::abi::CAI_FIELD_NAME_CAPACITY], typestr: [0; 32], offset: 0 };
        for (slot, byte) in field.name.iter_mut().zip(name.bytes()) {
            *slot = byte as std::os::raw::c_char;
        }
        field
    }

    #[test]
    fn the_struct_points_at_the_fields_and_the_mask_it_owns_wherever_the_description_moves() {
        let mask = Description::new(Box::new(CaiArray::zeroed()), vec![], None);
        let mask_address = mask.array() as *const CaiArray;
        let described =
            Description::new(Box::new(CaiArray::zeroed()), vec![named("x"), named("y")], Some(mask));
        let moved = Box::new([described]);
        let array = moved[0].array();
        assert_eq!(array.descr_count, 2);
        assert_eq!(array.descr, moved[0].fields().as_ptr());
        assert_eq!(array.mask, mask_address);
        assert!(moved[0].mask().is_some_and(|m| std::ptr::eq(m.array(), array.mask)));
        let plain = Description::borrowing(Box::new(CaiArray::zeroed()));
        assert!(plain.array().descr.is_null() && plain.fields().is_empty() && plain.mask().is_none());
    }
}
