#!/bin/bash
# A skopeo that signs and verifies sigstore signatures, for tests/integration/image_signatures.rs.
#
# Debian 12's skopeo (1.9) was built with sigstore disabled ("Debian-local change: sigstore
# disabled", when signing and when verifying). Debian 13's (1.18) has it. This fetches that
# package and the C library it was built against with apt-get from the machine's own Debian
# mirror (read from its apt sources), unpacks both under DIR without installing anything
# system-wide, and writes DIR/skopeo: a wrapper that runs it with that C library.
#
# usage: install-skopeo.sh DIR     then: OLM_RS_SKOPEO=DIR/skopeo
set -euo pipefail
dir=$(realpath -m "${1:?usage: install-skopeo.sh DIR}")
if [ -x "$dir/skopeo" ] && "$dir/skopeo" generate-sigstore-key --help >/dev/null 2>&1; then
  exit 0
fi
mirror=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || { echo "install-skopeo.sh: no Debian mirror in the apt sources" >&2; exit 1; }
apt_dir="$dir/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$dir/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" >"$apt_dir/sources.list"
opts=(-qq -o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o Dir::Etc::sourceparts=/dev/null
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache")
apt-get "${opts[@]}" update
(cd "$dir/debs" && apt-get "${opts[@]}" download skopeo libc6 2>/dev/null)
rm -rf "$dir/root"
for deb in "$dir"/debs/skopeo_*.deb "$dir"/debs/libc6_*.deb; do
  dpkg -x "$deb" "$dir/root"
done
cat >"$dir/skopeo" <<WRAPPER
#!/bin/sh
exec "$dir/root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$dir/root/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$dir/root/usr/bin/skopeo" "\$@"
WRAPPER
chmod +x "$dir/skopeo"
"$dir/skopeo" --version
