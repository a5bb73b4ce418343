//! What a replay counts: what each record became at the API server, overall and per involved object.

use serde::{Deserialize, Serialize};

/// What reached the API server for one input event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Patch,
    Skip,
}

impl Action {
    /// The name that decisions carry (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Patch => "patch",
            Action::Skip => "skip",
        }
    }
}

/// The counts of a replay or of one object. `creates + patches + skips == events`; `aggregated` counts the
/// events the aggregator replaced by a "(combined from similar events)" event, whether written or skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub events: u64,
    pub creates: u64,
    pub patches: u64,
    pub skips: u64,
    pub aggregated: u64,
}

impl Totals {
    pub fn writes(&self) -> u64 {
        self.creates + self.patches
    }

    pub fn add(&mut self, o: &Totals) {
        self.events += o.events;
        self.creates += o.creates;
        self.patches += o.patches;
        self.skips += o.skips;
        self.aggregated += o.aggregated;
    }

    pub fn count(&mut self, action: Action, aggregated: bool) {
        self.events += 1;
        self.aggregated += u64::from(aggregated);
        match action {
            Action::Create => self.creates += 1,
            Action::Patch => self.patches += 1,
            Action::Skip => self.skips += 1,
        }
    }
}

/// An involved object: kind, namespace, name.
pub type ObjectKey = (String, String, String);

/// One object's counts as `Simulation.top_objects` lists them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ObjectTotals {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub events: u64,
    pub writes: u64,
    pub creates: u64,
    pub patches: u64,
    pub skips: u64,
}

impl ObjectTotals {
    pub fn new((kind, namespace, name): ObjectKey, t: &Totals) -> Self {
        ObjectTotals {
            kind,
            namespace,
            name,
            events: t.events,
            writes: t.writes(),
            creates: t.creates,
            patches: t.patches,
            skips: t.skips,
        }
    }
}

/// Most API writes first, then most events, then by key: the order of the per-object lists.
pub fn busiest_first(a: (&ObjectKey, &Totals), b: (&ObjectKey, &Totals)) -> std::cmp::Ordering {
    b.1.writes().cmp(&a.1.writes()).then(b.1.events.cmp(&a.1.events)).then(a.0.cmp(b.0))
}
