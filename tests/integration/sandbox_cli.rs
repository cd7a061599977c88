//! `olm-rs sandbox` as a user runs it: the binary, its printed phase transitions, a Manual plan
//! approved through the printed kubeconfig, Ctrl-C, and bad flags.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use olm_rs::api::InstallPlan;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const BIN: &str = env!("CARGO_BIN_EXE_olm-rs");
const PKG: &str = "greeter-operator";

fn sandbox(args: &[&str]) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(BIN)
        .arg("sandbox")
        .args(args)
        // The default catalog is found relative to the working directory first.
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("olm-rs runs");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// Next stdout line within 30 s; `None` at end of output.
async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> Option<String> {
    tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the sandbox printed nothing for 30 s")
        .expect("stdout readable")
}

/// CSV name → the phases printed for it, in order (`deleted` included).
fn csv_phases(output: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut phases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in output {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [_time, "CSV", name, phase, ..] = words.as_slice() {
            let seen = phases.entry((*name).to_owned()).or_default();
            // Several reasons within one phase print several lines; keep the phase once.
            if seen.last().map(String::as_str) != Some(*phase) {
                seen.push((*phase).to_owned());
            }
        }
    }
    phases
}

fn csv(version: &str) -> String {
    format!("{PKG}.v{version}")
}

fn install_hop() -> Vec<&'static str> {
    vec![
        "created",
        "Pending",
        "InstallReady",
        "Installing",
        "Succeeded",
    ]
}

fn replaced_hop() -> Vec<&'static str> {
    let mut hop = install_hop();
    hop.extend(["Replacing", "Deleting", "deleted"]);
    hop
}

#[tokio::test]
async fn default_run_installs_the_oldest_then_upgrades_hop_by_hop_to_the_head() {
    let (mut child, mut lines) = sandbox(&["--exit-when-settled", "--timeout", "60s"]);
    let mut output = Vec::new();
    while let Some(line) = next_line(&mut lines).await {
        output.push(line);
    }
    let status = child.wait().await.unwrap();
    let text = output.join("\n");
    assert!(status.success(), "{text}");
    assert!(text.contains("a SIMULATED cluster"), "{text}");
    assert!(text.contains("no pod ever runs"), "{text}");
    let export = output
        .iter()
        .find(|l| l.starts_with("export KUBECONFIG="))
        .unwrap_or_else(|| panic!("no KUBECONFIG line:\n{text}"));
    assert!(export.ends_with("/kubeconfig"), "{export}");

    let phases = csv_phases(&output);
    assert_eq!(
        phases.keys().cloned().collect::<Vec<_>>(),
        [csv("1.0.0"), csv("1.1.0"), csv("1.2.0")],
        "1.1.1 is skipped and 2.0.0 is in another channel:\n{text}"
    );
    assert_eq!(phases[&csv("1.0.0")], replaced_hop(), "{text}");
    assert_eq!(phases[&csv("1.1.0")], replaced_hop(), "{text}");
    assert_eq!(phases[&csv("1.2.0")], install_hop(), "{text}");

    // One InstallPlan per hop, each Complete.
    let completed: Vec<&String> = output
        .iter()
        .filter(|l| l.contains(" InstallPlan ") && l.contains(" Complete "))
        .collect();
    assert_eq!(completed.len(), 3, "{text}");
    assert!(
        output.iter().any(|l| l.contains(" Subscription ")
            && l.contains("AtLatestKnown")
            && l.contains(&format!("installed {}", csv("1.2.0")))),
        "{text}"
    );
    let settled = output
        .iter()
        .find(|l| l.starts_with("settled: "))
        .unwrap_or_else(|| panic!("never settled:\n{text}"));
    assert!(
        settled.starts_with(&format!(
            "settled: {} Succeeded, Subscription AtLatestKnown (",
            csv("1.2.0")
        )),
        "{settled}"
    );
    // The default kubeconfig lives in a temporary directory removed on exit.
    let path = PathBuf::from(export.trim_start_matches("export KUBECONFIG="));
    assert!(!path.exists(), "{} left behind", path.display());
}

#[tokio::test]
async fn a_manual_plan_waits_until_approved_through_the_printed_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut child, mut lines) = sandbox(&[
        "--approval",
        "Manual",
        "--starting-csv",
        &csv("1.1.1"),
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
        "--exit-when-settled",
        "--timeout",
        "60s",
    ]);
    let mut output = Vec::new();
    let mut client = None;
    let mut approved = Vec::new();
    while let Some(line) = next_line(&mut lines).await {
        if line.starts_with("export KUBECONFIG=") {
            assert_eq!(line, format!("export KUBECONFIG={}", kubeconfig.display()));
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .unwrap();
            assert_eq!(config.default_namespace, "operators");
            client = Some(kube::Client::try_from(config).unwrap());
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [_, "InstallPlan", name, "RequiresApproval", ..] = words.as_slice() {
            assert!(line.contains("approve with: kubectl -n operators patch installplan"));
            // Nothing is installed while the plan waits.
            assert!(
                !output.iter().any(|l: &String| l.contains(" CSV ")
                    && l.contains(&csv(if approved.is_empty() {
                        "1.1.1"
                    } else {
                        "1.2.0"
                    }))),
                "installed before approval:\n{}",
                output.join("\n")
            );
            let plans: Api<InstallPlan> =
                Api::default_namespaced(client.clone().expect("kubeconfig line came first"));
            plans
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"spec": {"approved": true}})),
                )
                .await
                .unwrap();
            approved.push((*name).to_owned());
        }
        output.push(line);
    }
    let text = output.join("\n");
    assert!(child.wait().await.unwrap().success(), "{text}");
    assert_eq!(
        approved.len(),
        2,
        "1.1.1, then 1.2.0 (skips 1.1.1):\n{text}"
    );
    let phases = csv_phases(&output);
    assert_eq!(
        phases.keys().cloned().collect::<Vec<_>>(),
        [csv("1.1.1"), csv("1.2.0")],
        "{text}"
    );
    assert_eq!(phases[&csv("1.1.1")], replaced_hop(), "{text}");
    assert_eq!(phases[&csv("1.2.0")], install_hop(), "{text}");
    assert!(
        kubeconfig.exists(),
        "a kubeconfig written where asked is the user's to keep"
    );
}

#[tokio::test]
async fn ctrl_c_stops_everything_and_exits_zero() {
    let (mut child, mut lines) = sandbox(&["--head"]);
    let mut output = Vec::new();
    while let Some(line) = next_line(&mut lines).await {
        let settled = line.starts_with("settled: ");
        output.push(line);
        if settled {
            break;
        }
    }
    let text = output.join("\n");
    assert!(
        text.contains(&format!("settled: {} Succeeded", csv("1.2.0"))),
        "{text}"
    );
    let pid = child.id().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let mut rest = Vec::new();
    while let Some(line) = next_line(&mut lines).await {
        rest.push(line);
    }
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("stopped within 15 s")
        .unwrap();
    let rest = rest.join("\n");
    assert!(status.success(), "{status:?}\n{rest}");
    assert!(rest.contains("stopping (Ctrl-C)"), "{rest}");
    assert!(rest.trim_end().ends_with("stopped."), "{rest}");
}

#[tokio::test]
async fn flags_that_do_not_fit_the_catalog_fail_before_anything_starts() {
    let out = Command::new(BIN)
        .args(["sandbox", "--channel", "beta", "--exit-when-settled"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--channel beta: package greeter-operator has no such channel"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing started, nothing printed");

    let missing = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["sandbox", "--catalog"])
        .arg(missing.path().join("nope"))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("no such directory"), "{stderr}");
}

#[tokio::test]
async fn a_run_that_does_not_settle_in_time_fails_and_says_so() {
    let out = Command::new(BIN)
        .args(["sandbox", "--exit-when-settled", "--timeout", "1ms"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("did not settle within 1ms (head greeter-operator.v1.2.0)"),
        "{stderr}"
    );
}
