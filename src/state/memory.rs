//! The state in this process: a map under one lock, bounded. No live record
//! is ever dropped to make room: a full store refuses the new record
//! ([`StoreError::Full`]), and the caller decides what that means (a keyed
//! call to a tool that is not idempotent does not run). Each owner (the
//! third part of a key, `toolgate:<kind>:<owner>:…`: a principal) may hold
//! a quarter of the store, so one principal's flood of keys fills its own
//! quota and never touches another's records; the owner `-`, the one caller
//! of a gateway without principals, may hold all of it. Expired records are
//! swept when a limit is reached.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use super::{gcra, Admission, BoxFuture, Bucket, Store, StoreError};

/// Records kept at most, by default.
pub(crate) const DEFAULT_MAX_RECORDS: usize = 100_000;

/// The owner whose quota is the whole store.
const SOLE_OWNER: &str = "-";

enum Entry {
    Record(Vec<u8>),
    Count(u64),
}

#[derive(Default)]
struct Records {
    entries: HashMap<String, (Entry, Instant)>,
    /// Records held per owner (expired ones not yet swept included).
    owners: HashMap<String, usize>,
    /// No record expires before this (none, when the map is empty): a full
    /// store sweeps only when something can have expired.
    earliest: Option<Instant>,
}

pub(crate) struct MemoryStore {
    records: Mutex<Records>,
    /// Rate-limit buckets: each one's theoretical arrival time, µs after
    /// `epoch`. A bucket whose time has passed is as good as absent, and is
    /// swept when there are more than `max`.
    buckets: Mutex<HashMap<String, u64>>,
    epoch: Instant,
    max: usize,
    per_owner: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_MAX_RECORDS)
    }
}

/// The owner of a key: its third `:`-separated part (`-` for a key of
/// another shape).
fn owner_of(key: &str) -> &str {
    key.split(':').nth(2).unwrap_or(SOLE_OWNER)
}

impl Records {
    fn insert(&mut self, key: &str, entry: Entry, until: Instant) {
        self.earliest = Some(self.earliest.map_or(until, |e| e.min(until)));
        if let Some(held) = self.entries.get_mut(key) {
            *held = (entry, until);
            return;
        }
        self.entries.insert(key.to_owned(), (entry, until));
        match self.owners.get_mut(owner_of(key)) {
            Some(count) => *count += 1,
            None => {
                self.owners.insert(owner_of(key).to_owned(), 1);
            }
        }
    }

    fn remove(&mut self, key: &str) {
        if self.entries.remove(key).is_some() {
            self.forget(key);
        }
    }

    fn forget(&mut self, key: &str) {
        let owner = owner_of(key);
        if let Some(count) = self.owners.get_mut(owner) {
            *count -= 1;
            if *count == 0 {
                self.owners.remove(owner);
            }
        }
    }

    fn sweep(&mut self) {
        let now = Instant::now();
        if self.earliest.is_none_or(|earliest| earliest > now) {
            return;
        }
        let expired: Vec<String> =
            self.entries.iter().filter(|(_, (_, until))| *until <= now).map(|(key, _)| key.clone()).collect();
        for key in expired {
            self.remove(&key);
        }
        self.earliest = self.entries.values().map(|(_, until)| *until).min();
    }

    fn held(&self, owner: &str) -> usize {
        self.owners.get(owner).copied().unwrap_or(0)
    }

    fn live(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key).filter(|(_, until)| *until > Instant::now()).map(|(entry, _)| entry)
    }
}

impl MemoryStore {
    /// A store of at most `max` records, a quarter of them per owner.
    pub(crate) fn with_capacity(max: usize) -> Self {
        let max = max.max(1);
        Self {
            records: Mutex::new(Records::default()),
            buckets: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            max,
            per_owner: (max / 4).max(1),
        }
    }

    /// Records held now (expired ones not yet swept included).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().entries.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        crate::lock::lock(&self.records)
    }

    /// Whether a new record of `key` fits: expired records are swept when a
    /// limit is reached; a live one is never dropped.
    fn room(&self, records: &mut Records, key: &str) -> Result<(), StoreError> {
        let owner = owner_of(key);
        let quota = if owner == SOLE_OWNER { self.max } else { self.per_owner };
        let fits = |r: &Records| r.entries.len() < self.max && r.held(owner) < quota;
        if fits(records) {
            return Ok(());
        }
        records.sweep();
        match (fits(records), records.entries.len() < self.max) {
            (true, _) => Ok(()),
            (false, true) => Err(StoreError::Full(format!("this principal holds {quota} live records, its quota"))),
            (false, false) => Err(StoreError::Full(format!("the store holds {} live records, its capacity", self.max))),
        }
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
        let mut records = self.lock();
        if let Some(Entry::Record(existing)) = records.live(key) {
            return ready(Ok(Some(existing.clone())));
        }
        if let Err(full) = self.room(&mut records, key) {
            return ready(Err(full));
        }
        records.insert(key, Entry::Record(value.to_vec()), Instant::now() + ttl);
        ready(Ok(None))
    }

    fn replace<'a>(
        &'a self,
        key: &'a str,
        expected: &'a [u8],
        value: &'a [u8],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let mut records = self.lock();
        let same = matches!(records.live(key), Some(Entry::Record(existing)) if existing == expected);
        if same {
            records.insert(key, Entry::Record(value.to_vec()), Instant::now() + ttl);
        }
        ready(Ok(same))
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        let records = self.lock();
        let found = match records.live(key) {
            Some(Entry::Record(record)) => Some(record.clone()),
            _ => None,
        };
        ready(Ok(found))
    }

    fn remove<'a>(&'a self, key: &'a str, expected: &'a [u8]) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut records = self.lock();
        if matches!(records.live(key), Some(Entry::Record(existing)) if existing == expected) {
            records.remove(key);
        }
        ready(Ok(()))
    }

    fn increment<'a>(&'a self, key: &'a str, ttl: Duration) -> BoxFuture<'a, Result<u64, StoreError>> {
        let mut records = self.lock();
        let count = match records.live(key) {
            Some(Entry::Count(n)) => n + 1,
            _ => 1,
        };
        if !records.entries.contains_key(key) {
            if let Err(full) = self.room(&mut records, key) {
                return ready(Err(full));
            }
        }
        records.insert(key, Entry::Count(count), Instant::now() + ttl);
        ready(Ok(count))
    }

    fn reset<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        self.lock().remove(key);
        ready(Ok(()))
    }

    fn admit<'a>(&'a self, buckets: &'a [Bucket]) -> BoxFuture<'a, Result<Admission, StoreError>> {
        let now = self.epoch.elapsed().as_micros() as u64;
        let mut held = crate::lock::lock(&self.buckets);
        let tats: Vec<u64> = buckets.iter().map(|b| held.get(&b.key).copied().unwrap_or(0)).collect();
        let admission = match gcra(buckets, &tats, now) {
            Ok(next) => {
                if held.len() >= self.max {
                    held.retain(|_, tat| *tat > now);
                }
                let mut rooms = Vec::with_capacity(next.len());
                for (bucket, (tat, room)) in buckets.iter().zip(next) {
                    match held.get_mut(&bucket.key) {
                        Some(held) => *held = tat,
                        None => {
                            held.insert(bucket.key.clone(), tat);
                        }
                    }
                    rooms.push(room);
                }
                Admission::Admitted(rooms)
            }
            Err((index, retry_after)) => Admission::Limited { index, retry_after },
        };
        ready(Ok(admission))
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
    fn a_million_distinct_keys_stay_bounded_and_no_live_record_is_dropped() {
        let store = MemoryStore::with_capacity(10_000);
        let ttl = Duration::from_secs(3600);
        let mut refused = 0;
        for i in 0..1_000_000u32 {
            match block(store.claim(&format!("toolgate:idem:-:k{i}"), b"r", ttl)) {
                Ok(_) => {}
                Err(StoreError::Full(_)) => refused += 1,
                Err(other) => panic!("{other}"),
            }
        }
        assert_eq!(store.len(), 10_000);
        assert_eq!(refused, 990_000);
        // The first are kept: a record is never dropped before it expires.
        assert!(block(store.get("toolgate:idem:-:k0")).unwrap().is_some());
    }

    #[test]
    fn one_owner_fills_its_own_quota_and_never_another_s_records() {
        let store = MemoryStore::with_capacity(1_000);
        let ttl = Duration::from_secs(3600);
        assert_eq!(block(store.claim("toolgate:idem:victim:k", b"r", ttl)).unwrap(), None);
        let mut kept = 0;
        for i in 0..10_000u32 {
            if block(store.claim(&format!("toolgate:idem:flood:k{i}"), b"r", ttl)).is_ok() {
                kept += 1;
            }
        }
        assert_eq!(kept, 250, "a quarter of the store");
        assert!(matches!(block(store.increment("toolgate:budget:flood:s:t", ttl)), Err(StoreError::Full(_))));
        assert_eq!(block(store.claim("toolgate:idem:victim:k", b"again", ttl)).unwrap(), Some(b"r".to_vec()));
        assert_eq!(block(store.claim("toolgate:idem:victim:other", b"r", ttl)).unwrap(), None);
        // Expired records make room again.
        let store = MemoryStore::with_capacity(8);
        for i in 0..2 {
            block(store.claim(&format!("toolgate:idem:p:k{i}"), b"r", Duration::from_millis(1))).unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
        assert!(block(store.claim("toolgate:idem:p:fresh", b"r", ttl)).is_ok());
    }
}
