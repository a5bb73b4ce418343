//! `podRecords`: per pod, the last committed listing (`old`) and this relist's (`current`). Kept sorted by
//! pod UID so a relist handles pods, and emits their events, in a deterministic order (Go iterates a map).

use std::collections::BTreeMap;

use super::pod::Pod;

#[derive(Debug, Default)]
pub struct PodRecord {
    pub old: Option<Pod>,
    pub current: Option<Pod>,
}

#[derive(Debug, Default)]
pub struct PodRecords(BTreeMap<String, PodRecord>);

impl PodRecords {
    pub fn get(&self, id: &str) -> Option<&PodRecord> {
        self.0.get(id)
    }

    pub fn get_old(&self, id: &str) -> Option<&Pod> {
        self.0.get(id).and_then(|r| r.old.as_ref())
    }

    pub fn get_current(&self, id: &str) -> Option<&Pod> {
        self.0.get(id).and_then(|r| r.current.as_ref())
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
    pub fn set_current(&mut self, pods: Vec<Pod>) {
        for r in self.0.values_mut() {
            r.current = None;
        }
        for pod in pods {
            match self.0.get_mut(&pod.id) {
                Some(r) => r.current = Some(pod),
                None => {
                    self.0.insert(pod.id.clone(), PodRecord { old: None, current: Some(pod) });
                }
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

    fn pod(id: &str) -> Pod {
        Pod { id: id.into(), ..Pod::default() }
    }

    #[test]
    fn set_current_and_update() {
        let mut r = PodRecords::default();
        r.set_current(vec![pod("b"), pod("a")]);
        assert_eq!(r.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["a", "b"]);
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
}
