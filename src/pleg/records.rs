//! `podRecords`: per pod, the last committed listing (`old`) and this relist's (`current`). Listings are
//! shared (`Arc`), so a relist of an unchanged node copies no pod.

use std::sync::Arc;

use foldhash::fast::RandomState;
use hashbrown::HashMap;

use super::pod::Pod;

#[derive(Debug, Default)]
pub struct PodRecord {
    pub old: Option<Arc<Pod>>,
    pub current: Option<Arc<Pod>>,
}

/// Unordered, like Go's map; the relist sorts the pods it acts on.
#[derive(Debug, Default)]
pub struct PodRecords(HashMap<String, PodRecord, RandomState>);

impl PodRecords {
    pub fn get(&self, id: &str) -> Option<&PodRecord> {
        self.0.get(id)
    }

    pub fn get_old(&self, id: &str) -> Option<&Pod> {
        self.0.get(id).and_then(|r| r.old.as_deref())
    }

    pub fn get_current(&self, id: &str) -> Option<&Pod> {
        self.0.get(id).and_then(|r| r.current.as_deref())
    }

    /// The pod's latest listing: this relist's, else the last committed one.
    pub fn latest(&self, id: &str) -> Option<&Arc<Pod>> {
        self.0.get(id).and_then(|r| r.current.as_ref().or(r.old.as_ref()))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &PodRecord)> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `setCurrent`: every record's current is cleared, then set from the listing (new pods get a record).
    pub fn set_current(&mut self, pods: Vec<Arc<Pod>>) {
        for r in self.0.values_mut() {
            r.current = None;
        }
        for pod in pods {
            self.set_current_one(pod);
        }
    }

    /// The on-demand relist's listing of one pod: its current is set (a new pod gets a record), the other
    /// records are left alone.
    pub fn set_current_one(&mut self, pod: Arc<Pod>) {
        match self.0.get_mut(&pod.id) {
            Some(r) => r.current = Some(pod),
            None => {
                self.0.insert(pod.id.clone(), PodRecord { old: None, current: Some(pod) });
            }
        }
    }

    /// `update`: commits current as old, or deletes the record when the pod is gone.
    pub fn update(&mut self, id: &str) {
        let Some(r) = self.0.get_mut(id) else { return };
        match r.current.take() {
            None => {
                self.0.remove(id);
            }
            Some(p) => r.old = Some(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(id: &str) -> Arc<Pod> {
        Arc::new(Pod { id: id.into(), ..Pod::default() })
    }

    #[test]
    fn set_current_and_update() {
        let mut r = PodRecords::default();
        r.set_current(vec![pod("b"), pod("a")]);
        assert_eq!(r.len(), 2);
        r.update("a");
        assert!(r.get_old("a").is_some() && r.get_current("a").is_none());
        r.set_current(vec![pod("b")]);
        // "a" is absent now: its record stays until update() deletes it.
        assert!(r.get("a").is_some() && r.get_current("a").is_none());
        r.update("a");
        assert!(r.get("a").is_none());
        r.update("missing");
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn set_current_one_leaves_the_others_alone() {
        let mut r = PodRecords::default();
        r.set_current(vec![pod("a"), pod("b")]);
        r.update("a");
        r.set_current_one(pod("a"));
        r.set_current_one(pod("c"));
        assert!(r.get_old("a").is_some() && r.get_current("a").is_some());
        assert!(r.get_current("b").is_some(), "b is not cleared");
        assert!(r.get_old("c").is_none() && r.get_current("c").is_some());
    }
}
