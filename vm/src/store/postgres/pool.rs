//! A small connection pool: idle clients kept in a list, new ones opened on
//! demand, broken ones dropped. (Written here rather than taking
//! `r2d2_postgres`: the store needs only this, and one less dependency
//! tree; every connection gets the session settings from the shared
//! `postgres::Config`.)

use postgres::{Client, Config, NoTls};
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

pub(crate) struct Pool {
    config: Config,
    idle: Mutex<Vec<Client>>,
    max_idle: usize,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("max_idle", &self.max_idle)
            .finish_non_exhaustive()
    }
}

/// A client lent by the pool; back into it on drop unless it broke.
pub(crate) struct Conn<'a> {
    pool: &'a Pool,
    client: Option<Client>,
}

impl Pool {
    pub(crate) fn new(config: Config, max_idle: usize) -> Pool {
        Pool {
            config,
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    pub(crate) fn connect(&self) -> Result<Client, postgres::Error> {
        self.config.connect(NoTls)
    }

    pub(crate) fn get(&self) -> Result<Conn<'_>, postgres::Error> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let client = match idle {
            Some(c) if !c.is_closed() => c,
            _ => self.connect()?,
        };
        Ok(Conn {
            pool: self,
            client: Some(client),
        })
    }
}

impl Deref for Conn<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        // Present from construction until drop.
        self.client.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        let Some(c) = self.client.take() else { return };
        if c.is_closed() {
            return;
        }
        let mut idle = self.pool.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.pool.max_idle {
            idle.push(c);
        }
    }
}
