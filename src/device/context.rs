//! Makes a context current for the length of a scope, and restores the previous one after.

use cuda_driver_sys::CUcontext;

use crate::driver::Driver;
use crate::status::Result;

/// Pushes `context` if it is not already current; pops it when dropped, on every path.
pub struct ContextGuard<'d> {
    driver: &'d Driver,
    pushed: bool,
}

impl<'d> ContextGuard<'d> {
    /// A NULL `context` means "whatever is current": nothing is pushed.
    pub fn enter(driver: &'d Driver, context: CUcontext) -> Result<ContextGuard<'d>> {
        let mut guard = ContextGuard { driver, pushed: false };
        if context.is_null() || context == current(driver)? {
            return Ok(guard);
        }
        // SAFETY: a context handle the driver gave us for a pointer or a stream.
        let status = unsafe { (driver.api.cuCtxPushCurrent)(context) };
        driver.check(status, || format!("cuCtxPushCurrent(context {context:p})"))?;
        guard.pushed = true;
        Ok(guard)
    }
}

impl Drop for ContextGuard<'_> {
    fn drop(&mut self) {
        if self.pushed {
            let mut popped: CUcontext = std::ptr::null_mut();
            // SAFETY: pops exactly the context this guard pushed. A failure here cannot be
            // reported from a destructor; the driver keeps its stack consistent regardless.
            unsafe { (self.driver.api.cuCtxPopCurrent)(&mut popped) };
        }
    }
}

/// The calling thread's current context (NULL when none).
pub fn current(driver: &Driver) -> Result<CUcontext> {
    let mut context: CUcontext = std::ptr::null_mut();
    // SAFETY: writes one handle.
    let status = unsafe { (driver.api.cuCtxGetCurrent)(&mut context) };
    driver.check(status, || "cuCtxGetCurrent".into())?;
    Ok(context)
}
