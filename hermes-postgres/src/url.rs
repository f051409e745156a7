//! The PostgreSQL driver's URL: `postgres://user:password@host:5432/db?queue=jobs&schema=hermes`,
//! read into the connection's settings, the default queue and the options.

use std::str::FromStr;

use hermes_core::Error;
use hermes_core::driver::DriverUrl;

use crate::PostgresOptions;

/// The parameters a PostgreSQL URL takes besides the connection's own.
const PARAMETERS: [&str; 10] = [
    "queue",
    "schema",
    "visibility_timeout",
    "refresh_interval",
    "listen",
    "pool_size",
    "migrate",
    "prefetch",
    "deferred_acks",
    "prune",
];

/// The connection's own parameters a URL may carry, handed to the client library (which
/// checks their values).
const CONNECTION_PARAMETERS: [&str; 12] = [
    "application_name",
    "options",
    "sslmode",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// What a URL names.
pub(crate) struct UrlConfig {
    pub(crate) database: tokio_postgres::Config,
    pub(crate) queue: String,
    pub(crate) options: PostgresOptions,
}

impl UrlConfig {
    /// Reads `url` (see [`PostgresDriver::from_url`](crate::PostgresDriver::from_url)): every
    /// mistake is found here, before anything connects.
    ///
    /// # Errors
    /// Those of `from_url` but for connection errors.
    pub(crate) fn parse(url: &str) -> Result<Self, Error> {
        let mut url = DriverUrl::parse(url, crate::NAME, &["postgres", "postgresql"])?;
        let mut options = PostgresOptions::default();
        let queue = url.take("queue").unwrap_or_else(|| "hermes".to_owned());
        if let Some(schema) = url.take("schema") {
            options.schema = schema;
        }
        if let Some(timeout) = url.take_seconds("visibility_timeout")? {
            options.visibility_timeout = timeout;
        }
        if let Some(interval) = url.take_seconds("refresh_interval")? {
            options.refresh_interval = interval;
        }
        crate::config::check(&options)?;
        if let Some(listen) = url.take_bool("listen")? {
            options.listen = listen;
        }
        if let Some(size) = url.take_parsed::<usize>("pool_size", "a whole number above 0")? {
            if size == 0 {
                return Err(url.error("pool_size is a whole number above 0"));
            }
            options.pool_size = size;
        }
        if let Some(migrate) = url.take_bool("migrate")? {
            options.migrate = migrate;
        }
        if let Some(prefetch) = url.take_parsed::<usize>("prefetch", "a whole number above 0")? {
            if prefetch == 0 {
                return Err(url.error("prefetch is a whole number above 0"));
            }
            options.prefetch = prefetch;
        }
        if let Some(deferred) = url.take_bool("deferred_acks")? {
            options.deferred_acks = deferred;
        }
        if let Some(prune) = url.take_bool("prune")? {
            options.prune = prune;
        }
        let mut connection = url.without_query();
        let mut separator = '?';
        for name in CONNECTION_PARAMETERS {
            if let Some(value) = url.take(name) {
                connection.push(separator);
                connection.push_str(name);
                connection.push('=');
                connection.push_str(&percent_encoded(&value));
                separator = '&';
            }
        }
        let database = database_config(&connection)?;
        let known: Vec<&str> = PARAMETERS
            .iter()
            .chain(&CONNECTION_PARAMETERS)
            .copied()
            .collect();
        url.finish(&known)?;
        Ok(UrlConfig {
            database,
            queue,
            options,
        })
    }
}

/// `value` with every byte but letters, digits and `-._~` percent-encoded.
fn percent_encoded(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The connection settings of `text`, a `postgres://` URL or a `key=value` connection string.
///
/// # Errors
/// [`Error::Config`] saying what does not parse, never the text.
pub(crate) fn database_config(text: &str) -> Result<tokio_postgres::Config, Error> {
    tokio_postgres::Config::from_str(text).map_err(|e| Error::Config {
        driver: crate::NAME,
        message: format!("invalid connection settings: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mistakes_are_named_before_connecting_and_hide_the_password() {
        for (url, says) in [
            ("redis://x", "postgres://"),
            ("postgres://u:hunter2@127.0.0.1/db?colour=red", "colour"),
            ("postgres://u:hunter2@127.0.0.1/db?listen=maybe", "listen"),
            ("postgres://u:hunter2@127.0.0.1/db?pool_size=0", "pool_size"),
            ("postgres://u:hunter2@127.0.0.1:99999/db", "URL"),
        ] {
            let Err(err) = UrlConfig::parse(url) else {
                panic!("{url} was accepted");
            };
            let err = err.to_string();
            assert!(err.contains(says), "{url}: {err}");
            assert!(!err.contains("hunter2"), "{url}: {err}");
        }
    }

    #[test]
    fn the_connections_own_parameters_go_to_the_connection() {
        let config = UrlConfig::parse(
            "postgres://app@127.0.0.1/shop?application_name=billing%20jobs&connect_timeout=3\
             &queue=mails",
        )
        .unwrap();
        assert_eq!(config.database.get_application_name(), Some("billing jobs"));
        assert_eq!(
            config.database.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        assert_eq!(config.queue, "mails");
        for zero in ["visibility_timeout=0", "refresh_interval=0"] {
            let Err(err) = UrlConfig::parse(&format!("postgres://app@127.0.0.1/shop?{zero}"))
            else {
                panic!("{zero} was accepted");
            };
            assert!(
                err.to_string().contains(zero.split('=').next().unwrap()),
                "{err}"
            );
        }
    }

    #[test]
    fn a_url_names_the_queue_the_schema_and_the_options() {
        let config = UrlConfig::parse(
            "postgresql://app:pw@10.0.0.1:6432/shop?queue=mails&schema=jobs&listen=false\
             &visibility_timeout=30&pool_size=3&migrate=false",
        )
        .unwrap();
        assert_eq!(config.queue, "mails");
        assert_eq!(config.options.schema, "jobs");
        assert!(!config.options.listen && !config.options.migrate);
        assert_eq!(config.options.pool_size, 3);
        assert_eq!(config.options.visibility_timeout.as_secs(), 30);
        assert_eq!(config.database.get_dbname(), Some("shop"));
        assert_eq!(config.database.get_user(), Some("app"));
    }
}
