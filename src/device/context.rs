//! Makes a context current for the length of a scope, and restores the previous one after.

use cuda_driver_sys::CUcontext;

use crate::driver::Driver;
use crate::status::Result;

/// Pushes `context` if it is not already current; pops it in `leave` on the path that
/// succeeds, and when dropped on every other path.
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

impl ContextGuard<'_> {
    /// Pops the pushed context now and reports a failure to: the path that succeeded ends
    /// here, so that a context the driver would not pop is an error, not a silent CAI_OK with
    /// the producer's context left current.
    pub fn leave(mut self) -> Result<()> {
        self.pop()
    }

    fn pop(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.pushed) {
            return Ok(());
        }
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: pops exactly the context this guard pushed.
        let status = unsafe { (self.driver.api.cuCtxPopCurrent)(&mut popped) };
        self.driver.check(status, || "cuCtxPopCurrent".into())
    }
}

impl Drop for ContextGuard<'_> {
    /// On a path that failed already: pops, best effort (the first failure is what is reported).
    fn drop(&mut self) {
        let _ = self.pop();
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
