//! The counters behind the dashboard's history: a hash per bucket (`<key>_counters:<bucket>`,
//! in the queue's slot), added to by one script call, expiring on its own.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{Counters, async_trait};

use crate::client::Reply;
use crate::core::Core;
use crate::scripts::Script;

impl Core {
    fn bucket_key(&self, bucket: &str) -> String {
        format!("{}:{bucket}", self.keys.counters)
    }
}

#[async_trait]
impl Counters for Core {
    async fn add(
        &self,
        bucket: &str,
        counts: &[(String, u64)],
        keep: Duration,
    ) -> Result<(), Error> {
        if counts.is_empty() {
            return Ok(());
        }
        let key = self.bucket_key(bucket);
        let mut args = vec![keep.as_millis().max(1).to_string()];
        for (name, n) in counts {
            args.push(name.clone());
            args.push(n.to_string());
        }
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.client
            .eval(Script::CountersAdd, &[&key], &args)
            .await?;
        Ok(())
    }

    async fn read(&self, buckets: &[String]) -> Result<Vec<(String, Vec<(String, u64)>)>, Error> {
        let mut read = Vec::new();
        for bucket in buckets {
            let key = self.bucket_key(bucket);
            let Reply::Array(items) = self.client.command("HGETALL", &[key.as_bytes()]).await?
            else {
                return Err(self.reply_error("HGETALL"));
            };
            let mut counts = Vec::with_capacity(items.len() / 2);
            let mut items = items.into_iter();
            while let (Some(name), Some(count)) = (items.next(), items.next()) {
                let name = name.into_bytes().and_then(|b| String::from_utf8(b).ok());
                let count = count
                    .into_bytes()
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|c| c.parse::<u64>().ok());
                if let (Some(name), Some(count)) = (name, count) {
                    counts.push((name, count));
                }
            }
            if !counts.is_empty() {
                read.push((bucket.clone(), counts));
            }
        }
        Ok(read)
    }
}
