//! `po-sandbox doctor`: can the layer run here, and if not, exactly why.

use crate::engine::{self, DetectOptions, EngineReport, HostEnv};
use crate::error::Result;

/// The oldest Node.js major the package supports.
pub const MIN_NODE_MAJOR: u32 = 24;

/// The Node.js check.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCheck {
    /// The version checked (`v24.1.0`), or empty when unknown.
    pub version: String,
    /// It is new enough.
    pub ok: bool,
    /// The requirement, in words.
    pub required: String,
}

/// Everything the doctor found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    /// The layer can run here.
    pub ok: bool,
    /// The Node.js check.
    pub node: NodeCheck,
    /// Engine detection, every candidate probed.
    pub engine: EngineReport,
    /// The report as a person reads it.
    pub text: String,
}

/// Checks a Node.js version string against [`MIN_NODE_MAJOR`].
pub fn check_node(version: &str) -> NodeCheck {
    let major = version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    NodeCheck {
        version: version.to_string(),
        ok: major.is_some_and(|m| m >= MIN_NODE_MAJOR),
        required: format!("Node.js {MIN_NODE_MAJOR} or newer"),
    }
}

/// Runs every check and renders the report.
pub async fn doctor(
    host: &HostEnv,
    node_version: &str,
    options: DetectOptions,
) -> Result<DoctorReport> {
    let engine = engine::detect(
        host,
        &DetectOptions {
            probe_all: true,
            ..options
        },
    )
    .await?;
    let node = check_node(node_version);
    let ok = node.ok && engine.available;
    let mut report = DoctorReport {
        ok,
        node,
        engine,
        text: String::new(),
    };
    report.text = render(&report);
    Ok(report)
}

/// The person-readable report.
pub fn render(r: &DoctorReport) -> String {
    let mut out = String::from("po-sandbox doctor\n\n");
    let node_version = if r.node.version.is_empty() {
        "unknown"
    } else {
        &r.node.version
    };
    out.push_str(&format!(
        "Node.js   {node_version}: {}\n\n",
        if r.node.ok {
            "ok".to_string()
        } else {
            format!("too old, needs {}", r.node.required)
        }
    ));
    out.push_str("Engine candidates, in the order tried:\n");
    for c in &r.engine.candidates {
        let mark = match c.outcome.as_str() {
            "available" => "ok",
            "not-found" => "--",
            _ => "!!",
        };
        out.push_str(&format!(
            "  [{mark}] {:<8} {} ({}): {}\n",
            c.engine, c.endpoint, c.source, c.detail
        ));
    }
    out.push('\n');
    let e = &r.engine;
    if e.available {
        out.push_str(&format!(
            "Engine    {} {} at {}\n          API {}, {} {}/{}, {}, {}\n",
            e.engine.as_deref().unwrap_or(""),
            e.engine_version.as_deref().unwrap_or(""),
            e.endpoint.as_deref().unwrap_or(""),
            e.api_version.as_deref().unwrap_or(""),
            e.os.as_deref().unwrap_or(""),
            e.os_type.as_deref().unwrap_or(""),
            e.arch.as_deref().unwrap_or(""),
            if e.vm { "in a VM" } else { "native" },
            if e.rootless { "rootless" } else { "rootful" },
        ));
    } else {
        out.push_str(&format!(
            "Engine    none usable [{}]\n          {}\n",
            e.reason_code.as_deref().unwrap_or(""),
            e.reason.as_deref().unwrap_or("")
        ));
    }
    out.push('\n');
    if r.ok {
        out.push_str("Result    ready: the sandbox layer can run here.\n");
    } else {
        let mut why = Vec::new();
        if !r.node.ok {
            why.push(format!("install {}", r.node.required));
        }
        if !e.available {
            why.push("make a container engine reachable (see Engine above)".to_string());
        }
        out.push_str(&format!("Result    not ready: {}.\n", why.join("; ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_versions() {
        assert!(check_node("v24.0.0").ok);
        assert!(check_node("v25.1.2").ok);
        assert!(!check_node("v20.20.2").ok);
        assert!(!check_node("").ok);
        assert!(!check_node("banana").ok);
    }

    #[test]
    fn render_names_the_reason_and_the_verdict() {
        let engine = EngineReport {
            reason: Some("No container engine is running here.".into()),
            reason_code: Some("ENGINE_NOT_INSTALLED".into()),
            ..Default::default()
        };
        let mut r = DoctorReport {
            ok: false,
            node: check_node("v20.1.0"),
            engine,
            text: String::new(),
        };
        let text = render(&r);
        assert!(
            text.contains("ENGINE_NOT_INSTALLED") && text.contains("No container engine"),
            "{text}"
        );
        assert!(
            text.contains("too old, needs Node.js 24 or newer"),
            "{text}"
        );
        assert!(text.contains("not ready"), "{text}");
        r.node = check_node("v24.3.0");
        r.engine.available = true;
        r.ok = true;
        assert!(render(&r).contains("ready: the sandbox layer can run here"));
    }
}
