//! The retention of ended webhook deliveries in `runs.db`
//! (`crate::webhook::deliver`'s prune): the statements are the webhook
//! tables' (`webhook.rs`), run here in one write transaction.

use super::runs::SqliteStore;
use crate::store::JournalError;

impl SqliteStore {
    pub(crate) fn prune_deliveries_sqlite(
        &self,
        ended_before_ms: i64,
        limit: i64,
    ) -> Result<i64, JournalError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(self.err())?;
        let n = super::webhook::prune(&tx, ended_before_ms, limit).map_err(self.err())?;
        tx.commit().map_err(self.err())?;
        Ok(n)
    }
}
