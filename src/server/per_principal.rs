//! What one principal may hold open at a door, counted at the shared edge
//! so every door bounds its own (the MCP door's GET streams, the model
//! door's requests) the same way: a place is held while its guard lives.
//! The anonymous caller is one principal.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

type Open = Arc<Mutex<HashMap<Option<Arc<str>>, usize>>>;

/// Places open per principal, at most `bound` each.
pub(crate) struct PerPrincipal {
    bound: usize,
    open: Open,
}

impl PerPrincipal {
    pub(crate) fn new(bound: usize) -> Self {
        Self { bound, open: Arc::default() }
    }

    pub(crate) fn bound(&self) -> usize {
        self.bound
    }

    /// A place for one more of `principal`'s, held until the guard drops;
    /// `None` past the bound.
    pub(crate) fn hold(&self, principal: Option<&Arc<str>>) -> Option<Held> {
        let mut open = crate::lock::lock(&self.open);
        let count = open.entry(principal.cloned()).or_default();
        if *count >= self.bound {
            return None;
        }
        *count += 1;
        Some(Held { principal: principal.cloned(), open: Arc::clone(&self.open) })
    }
}

/// One place held, counted until dropped.
pub(crate) struct Held {
    principal: Option<Arc<str>>,
    open: Open,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = crate::lock::lock(&self.open);
        if let Some(count) = open.get_mut(&self.principal) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principals_places_are_bounded_and_freed_when_dropped() {
        let places = PerPrincipal::new(2);
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let first = places.hold(Some(&a)).unwrap();
        let _second = places.hold(Some(&a)).unwrap();
        assert!(places.hold(Some(&a)).is_none());
        let _other = places.hold(Some(&b)).expect("another principal's bound is its own");
        let _anonymous = places.hold(None).expect("the anonymous caller is one principal");
        drop(first);
        assert!(places.hold(Some(&a)).is_some());
    }
}
