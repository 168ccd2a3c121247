//! Makes a context current for the length of a scope, and restores the previous one after.

use crate::driver::cuda::CUcontext;
use crate::driver::Driver;
use crate::status::Result;

/// Pushes `context` if it is not already current; pops it in `leave` on the path that
/// succeeds, and when dropped on every other path.
pub(crate) struct ContextGuard<'d> {
    driver: &'d Driver,
    pushed: bool,
}

impl<'d> ContextGuard<'d> {
    /// A NULL `context` means "whatever is current": nothing is pushed.
    pub(crate) fn enter(driver: &'d Driver, context: CUcontext) -> Result<ContextGuard<'d>> {
        let mut guard = ContextGuard { driver, pushed: false };
        if context.is_null() || context == driver.current_context()? {
            return Ok(guard);
        }
        driver.push_context(context)?;
        guard.pushed = true;
        Ok(guard)
    }

    /// Pops the pushed context now and reports a failure to: the path that succeeded ends
    /// here, so that a context the driver would not pop is an error, not a silent CAI_OK with
    /// the producer's context left current.
    pub(crate) fn leave(mut self) -> Result<()> {
        self.pop()
    }

    fn pop(&mut self) -> Result<()> {
        if std::mem::take(&mut self.pushed) {
            self.driver.pop_context()
        } else {
            Ok(())
        }
    }
}

impl Drop for ContextGuard<'_> {
    /// On a path that failed already: pops, best effort (the first failure is what is reported).
    fn drop(&mut self) {
        let _ = self.pop();
    }
}
