//! Graphviz drawing of upgrade graphs: arrows point in the upgrade direction (installed →
//! replacement); solid = replaces, dashed = skips, dotted = skipRange; heads are bold.

use olm_rs::catalog::{ChannelIndex, EdgeKind, PackageIndex};

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

pub fn dot(package: &PackageIndex, channels: &[&ChannelIndex]) -> String {
    let mut out = String::new();
    out.push_str(&format!("digraph {} {{\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n", quote(package.name())));
    for (i, c) in channels.iter().enumerate() {
        let g = c.graph();
        let head = g.channel_head().ok().map(|h| h.name.clone());
        let default = package.default_channel_name() == Some(c.name());
        out.push_str(&format!(
            "  subgraph cluster_{i} {{\n    label={};\n",
            quote(&format!("channel {}{}", c.name(), if default { " (default)" } else { "" }))
        ));
        let id = |name: &str| quote(&format!("{}/{}", c.name(), name));
        for e in g.entries() {
            let version = e.version.as_ref().map(ToString::to_string).unwrap_or_default();
            let style = if head.as_deref() == Some(e.name.as_str()) { ", style=bold, penwidth=2" } else { "" };
            out.push_str(&format!("    {} [label={}{style}];\n", id(&e.name), quote(&format!("{}\\n{version}", e.name))));
        }
        for edge in g.edges() {
            if !edge.to_in_channel {
                out.push_str(&format!("    {} [label={}, style=dashed, color=gray];\n", id(edge.to), quote(edge.to)));
            }
            let style = match edge.kind {
                EdgeKind::Replaces => "solid",
                EdgeKind::Skips => "dashed",
                EdgeKind::SkipRange => "dotted",
            };
            out.push_str(&format!("    {} -> {} [style={style}, tooltip={}];\n", id(edge.to), id(edge.from), quote(&edge.kind.to_string())));
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}
