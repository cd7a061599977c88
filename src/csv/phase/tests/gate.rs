use super::*;

// ---- the gate (docs/csv-phases.md §2) -------------------------------------------------------------------

#[test]
fn no_operator_group_fails_and_too_many_names_them() {
    let c = csv("a.v1");
    let mut seen = observed(&[&c]);
    seen.operator_groups.clear();
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::NoOperatorGroup,
        "csv in namespace with no operatorgroups",
    );
    seen.operator_groups = vec![
        Arc::new(og("og-b", NS, &[NS])),
        Arc::new(og("og-a", NS, &[NS])),
    ];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::TooManyOperatorGroups,
        "csv created in namespace with multiple operatorgroups, can't pick one automatically: og-a, og-b",
    );
}

#[test]
fn membership_annotations_are_written_and_an_empty_group_fails() {
    let mut c = csv("a.v1");
    c.metadata.annotations = None;
    let mut seen = observed(&[&c]);
    let s = sync(&c, &seen, t(10));
    assert!(
        s.status.is_none(),
        "annotating alone does not touch the status"
    );
    let Some(Action::SetAnnotations(wanted)) = s
        .actions
        .iter()
        .find(|a| matches!(a, Action::SetAnnotations(_)))
    else {
        panic!("expected SetAnnotations in {:?}", s.actions);
    };
    assert_eq!(
        wanted.get(TARGET_NAMESPACES_ANNOTATION),
        Some(&Some(NS.to_owned()))
    );

    seen.operator_groups = vec![Arc::new(og("og", NS, &[]))];
    let mut stale = csv("a.v1");
    stale
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(TARGET_NAMESPACES_ANNOTATION.into(), String::new());
    let s = sync(&stale, &seen, t(10));
    assert_outcome(
        &s,
        P::Failed,
        R::NoTargetNamespaces,
        "no targetNamespaces are matched operatorgroups namespace selection",
    );
    // The stale `""` (= all namespaces) is removed, as the OperatorGroup sync would.
    assert!(
        s.actions
            .iter()
            .any(|a| matches!(a, Action::SetAnnotations(w)
            if w.get(TARGET_NAMESPACES_ANNOTATION) == Some(&None))),
        "{:?}",
        s.actions
    );
}

#[test]
fn install_modes_are_checked_against_targets() {
    let mut c = csv("a.v1");
    c.spec.install_modes.as_mut().unwrap()[1].type_ = crate::api::InstallModeType::OwnNamespace;
    let seen = observed(&[&c]);
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::InvalidInstallModes,
        "InstallMode list contains duplicates, cannot make set: [{OwnNamespace true} {OwnNamespace true}",
    );

    let mut c = csv("a.v1");
    c.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(TARGET_NAMESPACES_ANNOTATION.into(), "x,y".into());
    let mut seen = observed(&[&c]);
    seen.operator_groups = vec![Arc::new(og("og", NS, &["y", "x"]))];
    assert_outcome(
        &sync(&c, &seen, t(10)),
        P::Failed,
        R::UnsupportedOperatorGroup,
        "MultiNamespace InstallModeType not supported, cannot configure to watch 2 namespaces",
    );
}

#[test]
fn provided_apis_are_added_to_the_group_then_conflicts_fail_the_csv() {
    let c = csv("a.v1");
    let seen = observed(&[&c]);
    let s = sync(&c, &seen, t(10));
    assert!(s.actions.contains(&Action::SetProvidedApis {
        group: "og".into(),
        annotation: "Demo.v1.example.com".into()
    }));

    // Another group covering `demo` (all namespaces) already provides the API.
    let mut seen = observed(&[&c]);
    let mut mine = og("og", NS, &[NS]);
    mine.metadata.annotations = Some(labels(&[(PROVIDED_APIS_ANNOTATION, "Demo.v1.example.com")]));
    let mut global = og("global", "operators", &[""]);
    global.metadata.annotations =
        Some(labels(&[(PROVIDED_APIS_ANNOTATION, "Demo.v1.example.com")]));
    seen.operator_groups = vec![Arc::new(mine.clone())];
    seen.all_operator_groups = vec![Arc::new(mine), Arc::new(global.clone())];
    let s = sync(&c, &seen, t(10));
    assert!(
        s.actions.contains(&Action::SetProvidedApis {
            group: "og".into(),
            annotation: String::new()
        }),
        "the API is first removed from the group: {:?}",
        s.actions
    );

    seen.operator_groups = vec![Arc::new(og("og", NS, &[NS]))];
    seen.all_operator_groups = vec![seen.operator_groups[0].clone(), Arc::new(global)];
    let s = sync(&c, &seen, t(10));
    assert_outcome(
        &s,
        P::Failed,
        R::InterOperatorGroupOwnerConflict,
        "intersecting operatorgroups provide the same apis: Demo.v1.example.com also provided by operatorgroup(s) operators/global",
    );
    assert!(
        s.actions
            .contains(&Action::DeleteDeployments(vec!["op".into()]))
    );
}

#[test]
fn a_static_group_refuses_new_apis() {
    let c = csv("a.v1");
    let mut seen = observed(&[&c]);
    let mut group = og("og", NS, &[NS]);
    group.spec.static_provided_apis = Some(true);
    seen.operator_groups = vec![Arc::new(group.clone())];
    seen.all_operator_groups = vec![Arc::new(group)];
    let s = sync(&c, &seen, t(10));
    assert_outcome(
        &s,
        P::Failed,
        R::CannotModifyStaticOperatorGroupProvidedApis,
        "static provided api operatorgroup cannot be modified by these apis",
    );
}

#[test]
fn no_retry_is_frozen_until_rbac_changes() {
    let c = in_phase(
        csv("a.v1"),
        P::Failed,
        R::InstallComponentFailedNoRetry,
        t(100),
    );
    let mut seen = ready(&[&c]);
    let s = sync(&c, &seen, t(200));
    assert!(s.status.is_none() && s.actions.is_empty());

    let mut rb = binding("late", "op-role", "op-sa");
    rb.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        time: Some(Time(t(150))),
        ..Default::default()
    }]);
    seen.role_bindings.push(Arc::new(rb));
    assert_outcome(
        &sync(&c, &seen, t(200)),
        P::Pending,
        R::DetectedClusterChange,
        "Cluster resources changed state",
    );
}

#[test]
fn no_retry_is_not_lifted_by_olm_rs_own_writes() {
    let c = in_phase(
        csv("a.v1"),
        P::Failed,
        R::InstallComponentFailedNoRetry,
        t(100),
    );
    let mut seen = ready(&[&c]);
    // The failed attempt itself wrote the CSV's Role in the second of the failure.
    let mut own = binding("a.v1", "a.v1", "op-sa");
    own.metadata.creation_timestamp = Some(Time(t(100)));
    own.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some(crate::k8s::MANAGER.into()),
        time: Some(Time(t(100))),
        ..Default::default()
    }]);
    seen.role_bindings.push(Arc::new(own));
    let s = sync(&c, &seen, t(200));
    assert!(s.status.is_none() && s.actions.is_empty(), "{s:?}");

    // A user's change in that same second still counts (timestamps have seconds resolution).
    let mut user = binding("extra", "op-role", "op-sa");
    user.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("kubectl-client-side-apply".into()),
        time: Some(Time(t(100))),
        ..Default::default()
    }]);
    seen.role_bindings.push(Arc::new(user));
    assert_outcome(
        &sync(&c, &seen, t(200)),
        P::Pending,
        R::DetectedClusterChange,
        "Cluster resources changed state",
    );
}
