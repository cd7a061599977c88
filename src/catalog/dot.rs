//! Graphviz drawing of upgrade graphs: arrows point in the upgrade direction (installed →
//! replacement); solid = replaces, dashed = skips, dotted = skipRange; heads are bold.

use super::index::{ChannelIndex, PackageIndex};
use super::upgrade_graph::EdgeKind;

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn quote(s: &str) -> String {
    format!("\"{}\"", escape(s))
}

/// The upgrade graph of `channels` of `package` in Graphviz `dot` syntax.
pub fn dot(package: &PackageIndex, channels: &[&ChannelIndex]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "digraph {} {{\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n",
        quote(package.name())
    ));
    for (i, c) in channels.iter().enumerate() {
        let g = c.graph();
        let head = g.channel_head().ok().map(|h| h.name.clone());
        let default = package.default_channel_name() == Some(c.name());
        out.push_str(&format!(
            "  subgraph cluster_{i} {{\n    label={};\n",
            quote(&format!(
                "channel {}{}",
                c.name(),
                if default { " (default)" } else { "" }
            ))
        ));
        let id = |name: &str| quote(&format!("{}/{}", c.name(), name));
        for e in g.entries() {
            let version = e
                .version
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            let style = if head.as_deref() == Some(e.name.as_str()) {
                ", style=bold, penwidth=2"
            } else {
                ""
            };
            // `\n` is DOT's line break inside a label: escape the parts, not the break.
            let label = format!("\"{}\\n{}\"", escape(&e.name), escape(&version));
            out.push_str(&format!("    {} [label={label}{style}];\n", id(&e.name)));
        }
        for edge in g.edges() {
            if !edge.to_in_channel {
                out.push_str(&format!(
                    "    {} [label={}, style=dashed, color=gray];\n",
                    id(edge.to),
                    quote(edge.to)
                ));
            }
            let style = match edge.kind {
                EdgeKind::Replaces => "solid",
                EdgeKind::Skips => "dashed",
                EdgeKind::SkipRange => "dotted",
            };
            out.push_str(&format!(
                "    {} -> {} [style={style}, tooltip={}];\n",
                id(edge.to),
                id(edge.from),
                quote(&edge.kind.to_string())
            ));
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use crate::catalog::model::{
        Bundle, Channel, ChannelEntry, DeclarativeConfig, Package, Property,
    };
    use crate::catalog::{CatalogIndex, properties};

    #[test]
    fn draws_edges_in_upgrade_direction_with_styles() {
        let bundle = |name: &str, v: &str| Bundle {
            package: "p".into(),
            name: name.into(),
            image: "img".into(),
            properties: vec![
                Property::from_value(
                    properties::PACKAGE,
                    &serde_json::json!({"packageName": "p", "version": v}),
                )
                .unwrap(),
            ],
            ..Bundle::default()
        };
        let index = CatalogIndex::new(DeclarativeConfig {
            packages: vec![Package {
                name: "p".into(),
                default_channel: Some("stable".into()),
                ..Package::default()
            }],
            channels: vec![Channel {
                package: "p".into(),
                name: "stable".into(),
                entries: vec![
                    ChannelEntry {
                        name: "p.v1".into(),
                        ..ChannelEntry::default()
                    },
                    ChannelEntry {
                        name: "p.v2".into(),
                        replaces: Some("p.v1".into()),
                        skips: vec!["p.v0".into()],
                        skip_range: Some("<2.0.0".into()),
                    },
                ],
                ..Channel::default()
            }],
            bundles: vec![bundle("p.v1", "1.0.0"), bundle("p.v2", "2.0.0")],
            ..DeclarativeConfig::default()
        });
        let p = index.package("p").unwrap();
        let text = super::dot(p, &p.channels().iter().collect::<Vec<_>>());
        assert!(text.starts_with("digraph \"p\" {"), "{text}");
        assert!(
            text.contains("\"stable/p.v1\" -> \"stable/p.v2\" [style=solid"),
            "{text}"
        );
        assert!(
            text.contains("\"stable/p.v0\" -> \"stable/p.v2\" [style=dashed"),
            "{text}"
        );
        assert!(
            text.contains("\"stable/p.v1\" -> \"stable/p.v2\" [style=dotted"),
            "{text}"
        );
        assert!(
            text.contains("\"stable/p.v2\" [label=\"p.v2\\n2.0.0\", style=bold"),
            "{text}"
        );
        assert!(
            text.contains("label=\"channel stable (default)\""),
            "{text}"
        );
    }
}
