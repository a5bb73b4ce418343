//! The relist's pure comparison of one pod's old and new listing (`computeEvents`, `generateEvents`,
//! `getContainersFromPods`, `getContainerState`).

use super::pod::{Container, ContainerState, Pod, PodLifecycleEvent, PodLifecycleEventType};

/// `plegContainerState`: the runtime state plus "non-existent"; "created" counts as unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PlegState {
    Running,
    Exited,
    Unknown,
    NonExistent,
}

fn convert(s: ContainerState) -> PlegState {
    match s {
        // The kubelet does not use "created" yet (convertState).
        ContainerState::Created | ContainerState::Unknown => PlegState::Unknown,
        ContainerState::Running => PlegState::Running,
        ContainerState::Exited => PlegState::Exited,
    }
}

/// Containers are searched before sandboxes, first match wins (`FindContainerByID`, `FindSandboxByID`).
fn state_in(pod: Option<&Pod>, id: &str) -> PlegState {
    let Some(p) = pod else { return PlegState::NonExistent };
    p.containers.iter().chain(&p.sandboxes).find(|c| c.id == id).map_or(PlegState::NonExistent, |c| convert(c.state))
}

fn push(out: &mut Vec<PodLifecycleEvent>, pid: &str, kind: PodLifecycleEventType, cid: &str) {
    out.push(PodLifecycleEvent { id: pid.to_owned(), kind, data: Some(cid.to_owned()) });
}

/// `generateEvents`: the transition table.
fn generate(out: &mut Vec<PodLifecycleEvent>, pid: &str, cid: &str, old: PlegState, new: PlegState) {
    if old == new {
        return;
    }
    match new {
        PlegState::Running => push(out, pid, PodLifecycleEventType::ContainerStarted, cid),
        PlegState::Exited => push(out, pid, PodLifecycleEventType::ContainerDied, cid),
        PlegState::Unknown => push(out, pid, PodLifecycleEventType::ContainerChanged, cid),
        PlegState::NonExistent => {
            // An exited container was reported dead already.
            if old != PlegState::Exited {
                push(out, pid, PodLifecycleEventType::ContainerDied, cid);
            }
            push(out, pid, PodLifecycleEventType::ContainerRemoved, cid);
        }
    }
}

/// Pairwise-equal listings produce no events; most pods of a relist take this path.
fn unchanged(old: &Pod, new: &Pod) -> bool {
    // Listings share the pods that did not change (one allocation), so most pods are equal by address.
    std::ptr::eq(old, new) || (old.containers == new.containers && old.sandboxes == new.sandboxes)
}

/// Lists with more entries than this de-duplicate through a hash set instead of a backwards scan.
const LINEAR_DEDUP: usize = 32;

/// Appends the events of one pod's change to `out`, in Go's order: old containers, old sandboxes, new
/// containers, new sandboxes, each container id once (first occurrence). The pod id comes from the old pod
/// when there is one. `ContainerChanged` is included; the PLEG filters it when sending.
pub fn diff_into(old: Option<&Pod>, new: Option<&Pod>, out: &mut Vec<PodLifecycleEvent>) {
    let pid = match (old, new) {
        (Some(o), Some(n)) if unchanged(o, n) => return,
        (Some(o), _) => o.id.as_str(),
        (None, Some(n)) => n.id.as_str(),
        (None, None) => return,
    };
    let lists: [&[Container]; 4] = [
        old.map_or(&[][..], |p| &p.containers),
        old.map_or(&[][..], |p| &p.sandboxes),
        new.map_or(&[][..], |p| &p.containers),
        new.map_or(&[][..], |p| &p.sandboxes),
    ];
    let total: usize = lists.iter().map(|l| l.len()).sum();
    let mut seen = (total > LINEAR_DEDUP).then(|| std::collections::HashSet::<&str>::with_capacity(total));
    let all = || lists.iter().flat_map(|l| l.iter());
    for (i, c) in all().enumerate() {
        let first = match seen.as_mut() {
            Some(set) => set.insert(c.id.as_str()),
            None => !all().take(i).any(|p| p.id == c.id),
        };
        if first {
            generate(out, pid, &c.id, state_in(old, &c.id), state_in(new, &c.id));
        }
    }
}

/// The events of one pod's change (see `diff_into`).
pub fn diff(old: Option<&Pod>, new: Option<&Pod>) -> Vec<PodLifecycleEvent> {
    let mut out = Vec::new();
    diff_into(old, new, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ContainerState::*;
    use PodLifecycleEventType::*;

    fn pod(id: &str, cs: &[(&str, ContainerState)], ss: &[(&str, ContainerState)]) -> Pod {
        let mk = |v: &[(&str, ContainerState)]| v.iter().map(|(i, s)| Container::new(*i, *s)).collect();
        Pod { id: id.into(), containers: mk(cs), sandboxes: mk(ss), ..Pod::default() }
    }

    fn ev(pid: &str, kind: PodLifecycleEventType, cid: &str) -> PodLifecycleEvent {
        PodLifecycleEvent::new(pid, kind, Some(cid))
    }

    #[test]
    fn transition_table() {
        use PlegState as P;
        let row = |old, new| {
            let mut out = Vec::new();
            generate(&mut out, "p", "c", old, new);
            out.into_iter().map(|e| e.kind).collect::<Vec<_>>()
        };
        assert_eq!(row(P::NonExistent, P::Running), [ContainerStarted]);
        assert_eq!(row(P::NonExistent, P::Exited), [ContainerDied]);
        assert_eq!(row(P::NonExistent, P::Unknown), [ContainerChanged]);
        assert_eq!(row(P::Running, P::Exited), [ContainerDied]);
        assert_eq!(row(P::Running, P::Unknown), [ContainerChanged]);
        assert_eq!(row(P::Running, P::NonExistent), [ContainerDied, ContainerRemoved]);
        assert_eq!(row(P::Exited, P::Running), [ContainerStarted]);
        assert_eq!(row(P::Exited, P::Unknown), [ContainerChanged]);
        assert_eq!(row(P::Exited, P::NonExistent), [ContainerRemoved]);
        assert_eq!(row(P::Unknown, P::Running), [ContainerStarted]);
        assert_eq!(row(P::Unknown, P::Exited), [ContainerDied]);
        assert_eq!(row(P::Unknown, P::NonExistent), [ContainerDied, ContainerRemoved]);
        for s in [P::Running, P::Exited, P::Unknown, P::NonExistent] {
            assert!(row(s, s).is_empty());
        }
    }

    #[test]
    fn created_counts_as_unknown() {
        let old = pod("p", &[("c", Unknown)], &[]);
        let new = pod("p", &[("c", Created)], &[]);
        assert!(diff(Some(&old), Some(&new)).is_empty());
        assert_eq!(diff(None, Some(&new)), [ev("p", ContainerChanged, "c")]);
    }

    #[test]
    fn order_is_old_containers_old_sandboxes_new_containers_new_sandboxes() {
        let old = pod("p", &[("a", Running)], &[("s1", Running)]);
        let new = pod("p", &[("b", Running), ("a", Exited)], &[("s2", Running)]);
        assert_eq!(
            diff(Some(&old), Some(&new)),
            [
                ev("p", ContainerDied, "a"),
                ev("p", ContainerDied, "s1"),
                ev("p", ContainerRemoved, "s1"),
                ev("p", ContainerStarted, "b"),
                ev("p", ContainerStarted, "s2"),
            ]
        );
    }

    #[test]
    fn containers_are_found_before_sandboxes_and_ids_dedup() {
        // "x" is both a container (exited) and a sandbox (running): the container's state counts.
        let new = pod("p", &[("x", Exited), ("x", Running)], &[("x", Running)]);
        assert_eq!(diff(None, Some(&new)), [ev("p", ContainerDied, "x")]);
    }

    #[test]
    fn pod_id_comes_from_the_old_pod() {
        let old = pod("old", &[("c", Running)], &[]);
        let new = pod("new", &[("c", Exited)], &[]);
        assert_eq!(diff(Some(&old), Some(&new)), [ev("old", ContainerDied, "c")]);
    }

    #[test]
    fn large_pods_dedup_through_a_set() {
        let ids: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
        let cs: Vec<(&str, ContainerState)> = ids.iter().map(|i| (i.as_str(), Running)).collect();
        let mut new = pod("p", &cs, &[]);
        new.sandboxes = new.containers.clone();
        let out = diff(None, Some(&new));
        assert_eq!(out.len(), 40);
        assert!(out.iter().all(|e| e.kind == ContainerStarted));
        assert_eq!(diff(Some(&new), None).len(), 80);
    }
}
