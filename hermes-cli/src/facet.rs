//! What a command needs of the driver beyond delivering: a facet, or the error that says this
//! backend has none.

use hermes_core::driver::{Browse, DeadLetters, Inspect, Workers};
use hermes_core::{Driver, Error};

/// The queues' figures and purging.
pub(crate) fn inspect(driver: &dyn Driver) -> Result<&dyn Inspect, Error> {
    driver.inspect().ok_or_else(|| lacks(driver, "inspection"))
}

/// Reading messages without taking them, deleting one.
pub(crate) fn browse(driver: &dyn Driver) -> Result<&dyn Browse, Error> {
    driver.browse().ok_or_else(|| lacks(driver, "peek"))
}

/// The dead letters.
pub(crate) fn dead_letters(driver: &dyn Driver) -> Result<&dyn DeadLetters, Error> {
    driver
        .dead_letters()
        .ok_or_else(|| lacks(driver, "dead letters"))
}

/// The live workers.
pub(crate) fn workers(driver: &dyn Driver) -> Result<&dyn Workers, Error> {
    driver
        .workers()
        .ok_or_else(|| lacks(driver, "live workers"))
}

fn lacks(driver: &dyn Driver, what: &'static str) -> Error {
    Error::Unsupported {
        driver: driver.name(),
        what,
    }
}
