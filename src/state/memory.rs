//! The state in this process: a map under one lock, bounded. Expired
//! records are swept when the map is full; if it is still full, the records
//! nearest their expiry go first, so a flood of distinct keys cannot grow
//! memory without limit.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use super::{BoxFuture, Store, StoreError};

/// Records kept at most, by default.
pub(crate) const DEFAULT_MAX_RECORDS: usize = 100_000;

enum Entry {
    Record(Vec<u8>),
    Count(u64),
}

pub(crate) struct MemoryStore {
    entries: Mutex<HashMap<String, (Entry, Instant)>>,
    max: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_MAX_RECORDS)
    }
}

impl MemoryStore {
    /// A store of at most `max` records.
    pub(crate) fn with_capacity(max: usize) -> Self {
        Self { entries: Mutex::new(HashMap::new()), max: max.max(1) }
    }

    /// Records held now (expired ones not yet swept included).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Entry, Instant)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Room for one more: expired records swept, then, if still full, the
    /// tenth nearest expiry dropped.
    fn make_room(entries: &mut HashMap<String, (Entry, Instant)>, max: usize) {
        if entries.len() < max {
            return;
        }
        let now = Instant::now();
        entries.retain(|_, (_, until)| *until > now);
        if entries.len() < max {
            return;
        }
        // The tenth nearest expiry, found without sorting (linear time).
        let mut expiries: Vec<Instant> = entries.values().map(|(_, until)| *until).collect();
        let tenth = (max / 10).max(1).min(expiries.len() - 1);
        let (_, cut, _) = expiries.select_nth_unstable(tenth);
        let cut = *cut;
        entries.retain(|_, (_, until)| *until > cut);
    }

    fn live<'a>(entries: &'a HashMap<String, (Entry, Instant)>, key: &str) -> Option<&'a Entry> {
        entries.get(key).filter(|(_, until)| *until > Instant::now()).map(|(entry, _)| entry)
    }
}

fn ready<T: Send + 'static>(value: T) -> BoxFuture<'static, T> {
    Box::pin(std::future::ready(value))
}

impl Store for MemoryStore {
    fn claim<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        let mut entries = self.lock();
        if let Some(Entry::Record(existing)) = Self::live(&entries, key) {
            return ready(Ok(Some(existing.clone())));
        }
        Self::make_room(&mut entries, self.max);
        entries.insert(key.to_owned(), (Entry::Record(value.to_vec()), Instant::now() + ttl));
        ready(Ok(None))
    }

    fn replace<'a>(
        &'a self,
        key: &'a str,
        expected: &'a [u8],
        value: &'a [u8],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let mut entries = self.lock();
        let same = matches!(Self::live(&entries, key), Some(Entry::Record(existing)) if existing == expected);
        if same {
            entries.insert(key.to_owned(), (Entry::Record(value.to_vec()), Instant::now() + ttl));
        }
        ready(Ok(same))
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        let entries = self.lock();
        let found = match Self::live(&entries, key) {
            Some(Entry::Record(record)) => Some(record.clone()),
            _ => None,
        };
        ready(Ok(found))
    }

    fn remove<'a>(&'a self, key: &'a str, expected: &'a [u8]) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut entries = self.lock();
        if matches!(Self::live(&entries, key), Some(Entry::Record(existing)) if existing == expected) {
            entries.remove(key);
        }
        ready(Ok(()))
    }

    fn increment<'a>(&'a self, key: &'a str, ttl: Duration) -> BoxFuture<'a, Result<u64, StoreError>> {
        let mut entries = self.lock();
        let count = match Self::live(&entries, key) {
            Some(Entry::Count(n)) => n + 1,
            _ => 1,
        };
        if !entries.contains_key(key) {
            Self::make_room(&mut entries, self.max);
        }
        entries.insert(key.to_owned(), (Entry::Count(count), Instant::now() + ttl));
        ready(Ok(count))
    }

    fn reset<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        self.lock().remove(key);
        ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block<T>(future: BoxFuture<'_, T>) -> T {
        futures::executor::block_on(future)
    }

    #[test]
    fn claims_replaces_and_counts() {
        let store = MemoryStore::default();
        let ttl = Duration::from_secs(60);
        assert_eq!(block(store.claim("k", b"a", ttl)).unwrap(), None);
        assert_eq!(block(store.claim("k", b"b", ttl)).unwrap(), Some(b"a".to_vec()));
        assert!(!block(store.replace("k", b"x", b"c", ttl)).unwrap());
        assert!(block(store.replace("k", b"a", b"c", ttl)).unwrap());
        block(store.remove("k", b"a")).unwrap();
        assert_eq!(block(store.get("k")).unwrap(), Some(b"c".to_vec()), "removed only if unchanged");
        block(store.remove("k", b"c")).unwrap();
        assert_eq!(block(store.get("k")).unwrap(), None);
        assert_eq!(block(store.increment("n", ttl)).unwrap(), 1);
        assert_eq!(block(store.increment("n", ttl)).unwrap(), 2);
        block(store.reset("n")).unwrap();
        assert_eq!(block(store.increment("n", ttl)).unwrap(), 1, "counting starts again");
    }

    #[test]
    fn records_expire() {
        let store = MemoryStore::default();
        assert_eq!(block(store.claim("k", b"a", Duration::from_millis(1))).unwrap(), None);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(block(store.claim("k", b"b", Duration::from_secs(1))).unwrap(), None);
    }

    #[test]
    fn a_million_distinct_keys_stay_bounded() {
        let store = MemoryStore::with_capacity(10_000);
        let ttl = Duration::from_secs(3600);
        for i in 0..1_000_000u32 {
            block(store.claim(&format!("toolgate:idem:k{i}"), b"r", ttl)).unwrap();
        }
        assert!(store.len() <= 10_000, "{}", store.len());
        // The newest are kept.
        assert!(block(store.get("toolgate:idem:k999999")).unwrap().is_some());
    }
}
