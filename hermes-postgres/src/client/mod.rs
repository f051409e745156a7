//! The transport: the pool of connections the driver sends on, and the connection idle workers
//! listen for notifications on, and the statements sent.

mod listen;
mod statements;

pub(crate) use listen::Listener;
pub(crate) use statements::{NOW, Sql};

use hermes_core::Error;

/// A pool of at most `size` connections with `config`, none opened yet.
///
/// # Errors
/// [`Error::Config`] when the pool cannot be built.
pub(crate) fn pool(
    config: tokio_postgres::Config,
    size: usize,
) -> Result<deadpool_postgres::Pool, Error> {
    let manager = deadpool_postgres::Manager::from_config(
        config,
        tokio_postgres::NoTls,
        deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        },
    );
    deadpool_postgres::Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(hermes_core::driver::CALL_TIMEOUT))
        .create_timeout(Some(hermes_core::driver::CALL_TIMEOUT))
        .build()
        .map_err(|e| Error::Config {
            driver: crate::NAME,
            message: format!("cannot build the connection pool: {e}"),
        })
}
