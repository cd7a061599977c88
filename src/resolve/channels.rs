//! Which channels of a package a Subscription searches (docs/resolution.md §4 step 4).

use crate::catalog::index::{ChannelIndex, PackageIndex};

/// Channels to search: the requested one, or all of them, default channel first, then by
/// name (docs/resolution.md §4 step 4). `None` when the requested channel does not exist.
pub(crate) fn ranked_channels<'a>(
    package: &'a PackageIndex,
    wanted: Option<&str>,
) -> Option<Vec<&'a ChannelIndex>> {
    if let Some(name) = wanted {
        return package.channel(name).map(|c| vec![c]);
    }
    let default = package.default_channel_name();
    let mut channels: Vec<&ChannelIndex> = package.channels().iter().collect();
    channels.sort_by_key(|c| (Some(c.name()) != default, c.name().to_owned()));
    Some(channels)
}
