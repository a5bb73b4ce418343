//! What client-go's `reference.GetReference` needs from a scheme: the group/version of each kind, for objects
//! that do not carry their own `apiVersion`/`kind` (typed client objects, the items of a list call).
//!
//! Built-in kinds come from a fixed table; custom resources are added with `register_kind`.

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

use crate::error::{Error, Result};
use crate::event::ObjectReference;

/// Built-in kinds and their API group ("" is the core group). The version comes from the object (a model
/// class name like `V1Deployment`) or, when nothing says it, is the group's stable version below.
const BUILTIN: &[(&str, &str, &str)] = &[
    // kind, group, preferred version
    ("Binding", "", "v1"),
    ("ComponentStatus", "", "v1"),
    ("ConfigMap", "", "v1"),
    ("Endpoints", "", "v1"),
    ("Event", "", "v1"),
    ("LimitRange", "", "v1"),
    ("Namespace", "", "v1"),
    ("Node", "", "v1"),
    ("PersistentVolume", "", "v1"),
    ("PersistentVolumeClaim", "", "v1"),
    ("Pod", "", "v1"),
    ("PodTemplate", "", "v1"),
    ("ReplicationController", "", "v1"),
    ("ResourceQuota", "", "v1"),
    ("Secret", "", "v1"),
    ("Service", "", "v1"),
    ("ServiceAccount", "", "v1"),
    ("MutatingWebhookConfiguration", "admissionregistration.k8s.io", "v1"),
    ("ValidatingWebhookConfiguration", "admissionregistration.k8s.io", "v1"),
    ("ValidatingAdmissionPolicy", "admissionregistration.k8s.io", "v1"),
    ("ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io", "v1"),
    ("CustomResourceDefinition", "apiextensions.k8s.io", "v1"),
    ("APIService", "apiregistration.k8s.io", "v1"),
    ("ControllerRevision", "apps", "v1"),
    ("DaemonSet", "apps", "v1"),
    ("Deployment", "apps", "v1"),
    ("ReplicaSet", "apps", "v1"),
    ("StatefulSet", "apps", "v1"),
    ("TokenReview", "authentication.k8s.io", "v1"),
    ("LocalSubjectAccessReview", "authorization.k8s.io", "v1"),
    ("SelfSubjectAccessReview", "authorization.k8s.io", "v1"),
    ("SubjectAccessReview", "authorization.k8s.io", "v1"),
    ("HorizontalPodAutoscaler", "autoscaling", "v2"),
    ("CronJob", "batch", "v1"),
    ("Job", "batch", "v1"),
    ("CertificateSigningRequest", "certificates.k8s.io", "v1"),
    ("Lease", "coordination.k8s.io", "v1"),
    ("EndpointSlice", "discovery.k8s.io", "v1"),
    ("FlowSchema", "flowcontrol.apiserver.k8s.io", "v1"),
    ("PriorityLevelConfiguration", "flowcontrol.apiserver.k8s.io", "v1"),
    ("Ingress", "networking.k8s.io", "v1"),
    ("IngressClass", "networking.k8s.io", "v1"),
    ("NetworkPolicy", "networking.k8s.io", "v1"),
    ("RuntimeClass", "node.k8s.io", "v1"),
    ("PodDisruptionBudget", "policy", "v1"),
    ("ClusterRole", "rbac.authorization.k8s.io", "v1"),
    ("ClusterRoleBinding", "rbac.authorization.k8s.io", "v1"),
    ("Role", "rbac.authorization.k8s.io", "v1"),
    ("RoleBinding", "rbac.authorization.k8s.io", "v1"),
    ("PriorityClass", "scheduling.k8s.io", "v1"),
    ("CSIDriver", "storage.k8s.io", "v1"),
    ("CSINode", "storage.k8s.io", "v1"),
    ("CSIStorageCapacity", "storage.k8s.io", "v1"),
    ("StorageClass", "storage.k8s.io", "v1"),
    ("VolumeAttachment", "storage.k8s.io", "v1"),
];

/// Group prefixes the official Python client puts before a class name when two groups share a kind
/// (`CoreV1Event`, `EventsV1Event`, `DiscoveryV1EndpointPort` ...).
const CLASS_GROUP_PREFIXES: &[(&str, &str)] = &[
    ("Core", ""),
    ("Events", "events.k8s.io"),
    ("Discovery", "discovery.k8s.io"),
    ("Storage", "storage.k8s.io"),
    ("Admissionregistration", "admissionregistration.k8s.io"),
    ("Apiextensions", "apiextensions.k8s.io"),
    ("Apiregistration", "apiregistration.k8s.io"),
    ("Authentication", "authentication.k8s.io"),
    ("Flowcontrol", "flowcontrol.apiserver.k8s.io"),
    ("Rbac", "rbac.authorization.k8s.io"),
];

fn registry() -> &'static RwLock<HashMap<String, String>> {
    static REGISTERED: OnceLock<RwLock<HashMap<String, String>>> = OnceLock::new();
    REGISTERED.get_or_init(Default::default)
}

/// `group/version`, or just `version` for the core group.
pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// Adds (or replaces) a kind, so that objects of that kind without an `apiVersion` get `api_version`.
/// Registered kinds take precedence over the built-in table.
pub fn register_kind(kind: &str, api_version: &str) -> Result<()> {
    if kind.is_empty() || api_version.is_empty() {
        return Err(Error::value("register_kind", "kind and api_version must not be empty"));
    }
    registry().write().unwrap_or_else(|p| p.into_inner()).insert(kind.to_owned(), api_version.to_owned());
    Ok(())
}

fn builtin(kind: &str) -> Option<&'static (&'static str, &'static str, &'static str)> {
    BUILTIN.iter().find(|(k, _, _)| *k == kind)
}

/// The `apiVersion` of a kind: a registered one, else the built-in group at its stable version.
pub fn api_version_of_kind(kind: &str) -> Option<String> {
    if let Some(v) = registry().read().unwrap_or_else(|p| p.into_inner()).get(kind) {
        return Some(v.clone());
    }
    builtin(kind).map(|(_, group, version)| api_version(group, version))
}

/// Splits a model class name of the official client (`V1Pod`, `V2HorizontalPodAutoscaler`,
/// `V1beta1CronJob`, `EventsV1Event`) into `(kind, apiVersion)`, when the kind is known.
pub fn kind_of_model_class(class: &str) -> Option<(String, String)> {
    let (group_hint, rest) = match CLASS_GROUP_PREFIXES.iter().find(|(p, _)| {
        class.strip_prefix(p).is_some_and(|r| r.starts_with('V') && r[1..].starts_with(|c: char| c.is_ascii_digit()))
    }) {
        Some((p, g)) => (Some(*g), &class[p.len()..]),
        None => (None, class),
    };
    let rest = rest.strip_prefix('V')?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 {
        return None;
    }
    let mut end = digits;
    for stage in ["alpha", "beta"] {
        if let Some(r) = rest[end..].strip_prefix(stage) {
            let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            if n > 0 {
                end += stage.len() + n;
            }
        }
    }
    let version = format!("v{}", &rest[..end]);
    let kind = &rest[end..];
    if !kind.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    if let Some(v) = registry().read().unwrap_or_else(|p| p.into_inner()).get(kind) {
        return Some((kind.to_owned(), v.clone()));
    }
    let group = match group_hint {
        Some(g) => g,
        None => builtin(kind)?.1,
    };
    Some((kind.to_owned(), api_version(group, &version)))
}

/// Completes the reference read from an object (client-go's `GetReference`/`GetPartialReference`): sets
/// `field_path` when given; fills a missing kind and apiVersion from `registered` (the object's class
/// registered with `register_kind`), else from the model class name `class()` or the kind table; and refuses
/// a reference without a kind or name. `class()` names the object in messages.
pub fn complete(
    r: &mut ObjectReference,
    field_path: Option<&str>,
    class: impl Fn() -> String,
    registered: impl FnOnce() -> Result<Option<(String, String)>>,
) -> Result<()> {
    if let Some(f) = field_path {
        r.field_path.clear();
        r.field_path.push_str(f);
    }
    if r.kind.is_empty() || r.api_version.is_empty() {
        fill_kind(r, &class, registered()?)?;
    }
    if r.name.is_empty() {
        let what = if r.kind.is_empty() { class() } else { r.kind.clone() };
        return Err(Error::value(
            "obj",
            format!("the {what} has no name (metadata.name, or name in an ObjectReference)"),
        ));
    }
    Ok(())
}

fn fill_kind(r: &mut ObjectReference, class: &impl Fn() -> String, registered: Option<(String, String)>) -> Result<()> {
    let set = |r: &mut ObjectReference, (kind, api_version): (String, String)| {
        if r.kind.is_empty() {
            r.kind = kind;
        }
        if r.api_version.is_empty() {
            r.api_version = api_version;
        }
    };
    if let Some(found) = registered {
        set(r, found);
        return Ok(());
    }
    if r.kind.is_empty() {
        let found = kind_of_model_class(&class()).ok_or_else(|| {
            let msg = "has no kind; set kind and apiVersion, or register its class with kubevents.register_kind";
            Error::value("obj", format!("the {} {msg}", class()))
        })?;
        set(r, found);
    }
    if r.api_version.is_empty() {
        let kind = &r.kind;
        r.api_version = api_version_of_kind(kind).ok_or_else(|| {
            Error::value(
                "obj",
                format!(
                    "the {kind} has no apiVersion and {kind:?} is not a built-in kind; set apiVersion or call \
                     kubevents.register_kind({kind:?}, api_version)"
                ),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(kind: &str, api_version: &str, name: &str) -> ObjectReference {
        ObjectReference { kind: kind.into(), api_version: api_version.into(), name: name.into(), ..Default::default() }
    }

    #[test]
    fn completing_a_reference() {
        let none = || Ok(None);
        let mut r = reference("", "", "p");
        complete(&mut r, Some("spec"), || "V1Pod".into(), none).unwrap();
        assert_eq!((r.kind.as_str(), r.api_version.as_str(), r.field_path.as_str()), ("Pod", "v1", "spec"));
        let mut r = reference("Deployment", "", "d");
        complete(&mut r, None, || "dict".into(), none).unwrap();
        assert_eq!(r.api_version, "apps/v1");
        let mut r = reference("", "", "w");
        complete(&mut r, None, || "Widget".into(), || Ok(Some(("Widget".into(), "example.com/v1".into())))).unwrap();
        assert_eq!((r.kind.as_str(), r.api_version.as_str()), ("Widget", "example.com/v1"));
        let err = |mut r: ObjectReference| complete(&mut r, None, || "Thing".into(), none).unwrap_err().to_string();
        assert!(err(reference("", "", "x")).starts_with("obj: the Thing has no kind; set kind and apiVersion"));
        assert!(err(reference("Gizmo", "", "x")).starts_with("obj: the Gizmo has no apiVersion and \"Gizmo\" is not"));
        assert_eq!(
            err(reference("Pod", "v1", "")),
            "obj: the Pod has no name (metadata.name, or name in an ObjectReference)"
        );
        assert!(err(reference("", "v1", "")).starts_with("obj: the Thing has no kind"));
    }

    #[test]
    fn builtin_kinds_get_their_group() {
        assert_eq!(api_version_of_kind("Pod").as_deref(), Some("v1"));
        assert_eq!(api_version_of_kind("Deployment").as_deref(), Some("apps/v1"));
        assert_eq!(api_version_of_kind("Ingress").as_deref(), Some("networking.k8s.io/v1"));
        assert_eq!(api_version_of_kind("Widget"), None);
    }

    #[test]
    fn model_class_names() {
        let k = |c: &str| kind_of_model_class(c);
        assert_eq!(k("V1Pod"), Some(("Pod".into(), "v1".into())));
        assert_eq!(k("V1Deployment"), Some(("Deployment".into(), "apps/v1".into())));
        assert_eq!(k("V2HorizontalPodAutoscaler"), Some(("HorizontalPodAutoscaler".into(), "autoscaling/v2".into())));
        assert_eq!(k("V1HorizontalPodAutoscaler"), Some(("HorizontalPodAutoscaler".into(), "autoscaling/v1".into())));
        assert_eq!(k("V1beta1CronJob"), Some(("CronJob".into(), "batch/v1beta1".into())));
        assert_eq!(k("EventsV1Event"), Some(("Event".into(), "events.k8s.io/v1".into())));
        assert_eq!(k("CoreV1Event"), Some(("Event".into(), "v1".into())));
        assert_eq!(k("V1ObjectMeta"), None);
        assert_eq!(k("Pod"), None);
        assert_eq!(k("V1"), None);
    }

    #[test]
    fn registered_kinds_win() {
        register_kind("Gadget", "example.com/v1alpha1").unwrap();
        assert_eq!(
            register_kind("", "v1").unwrap_err().to_string(),
            "register_kind: kind and api_version must not be empty"
        );
        assert_eq!(api_version_of_kind("Gadget").as_deref(), Some("example.com/v1alpha1"));
        assert_eq!(kind_of_model_class("V1alpha1Gadget"), Some(("Gadget".into(), "example.com/v1alpha1".into())));
    }
}
