#!/bin/sh
# Fetch LBNL Node Health Check (NHC) 1.4.3 into DEST, checked file by file, for the bring-up to install:
#
#     sh bringup/fetch_nhc.sh URL DEST
#
# URL is a .tar.gz of NHC's source tree, one top folder (GitHub's tag archive, the default: site.yml's
# orchgen_nhc_url, which a mirror overrides with ORCHGEN_NHC_URL; a file:// URL works too). Debian and
# Ubuntu do not package NHC, and NHC publishes no checksum of its release archives, so the pin is the
# content: each file the bring-up installs (nhc, nhc-genconf, nhc-wrapper, helpers/, scripts/) must have
# the sha256 below, taken from tag 1.4.3 of github.com/mej/nhc (commit
# d534d41db4237b018f18a3063c4ceb86b91fbe42; `git show 1.4.3:FILE | sha256sum`), and helpers/ and scripts/
# must hold no other file (NHC sources every scripts/*.nhc as root). Anything else: a one-line message on
# stderr, exit 1, DEST untouched. DEST is written only whole and checked (a cache: site.yml skips the
# fetch when DEST/nhc exists).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 URL DEST" >&2; exit 2; }
url=$1 dest=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/orchgen-nhc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! curl -fsSL -o "$tmp/nhc.tar.gz" "$url" 2>"$tmp/err"; then
  echo "NHC: cannot fetch $url: $(head -n 1 "$tmp/err")" >&2
  exit 1
fi
mkdir "$tmp/src"
if ! tar -xzf "$tmp/nhc.tar.gz" --strip-components=1 -C "$tmp/src" 2>"$tmp/err"; then
  echo "NHC: $url is not a .tar.gz of NHC's source: $(grep -v '^$' "$tmp/err" | head -n 1)" >&2
  exit 1
fi
cat >"$tmp/nhc.sha256" <<'EOF'
d98ae8433d2c68032a90681dcd0f11088ce4f97764482625591d16b2f8f858a9  nhc
24b9fcbafad48e3618f43db728e815e0ecf4ca8058e65d0c5e7bd2a5ef192fe1  nhc-genconf
7ca9ed4766eb952363243284f951e5aac580c7b85e65e2e5cd05f5c86640fc7d  nhc-wrapper
8d0522e54574dbc5a3f7f11c23607d9ba0e7b328bf36441d73c084c3781555e6  helpers/node-mark-offline
993c93b6cdc251a2c8ca6a7adfb0ead7dcaa574f04c7133a5ae3a2494ab02996  helpers/node-mark-online
5a4867c2613648f65e4ca210b7e1965c0d3f1f00a0cc673580ecc263f0a5a535  scripts/common.nhc
3834facd81f03c95c797ce4af6aae665ea9fc8b2795b975c36ba369f219971f1  scripts/csc_nvidia_smi.nhc
4afc92ca3bc09a0260e5d9095a6c1f9e3c57208c54c6eede5eee1fb053b1d05b  scripts/lbnl_cmd.nhc
4b617d3440c96c4b30caa28bde2cce66d4ba9855962b1c32d9cd0747c09ac58d  scripts/lbnl_dmi.nhc
7996a7f06faa896d85c3ab59c9230d36d87b3c2176308e83e79420c223d6ce8d  scripts/lbnl_file.nhc
32364919ccd9e27d56e53a3edee664c7359126f3efbca17237a6c820dc6ae6de  scripts/lbnl_fs.nhc
cda07153e1965e59dae40c206af7b34fe2257d5b22c9e0237ff22c8cd0aaaa12  scripts/lbnl_hw.nhc
13362e020cabbe7c76708eb006d3e286630f89929e7bfb66466a68473d590c0c  scripts/lbnl_job.nhc
1b0087d6ad6d8276c5d14e7a0d6b01b96e0f0b0d7f2dbd00e07f08c11a92707d  scripts/lbnl_moab.nhc
e8852e5e5ac177da50e879059974ad0f0657a20527d3668814ba3594eff3f100  scripts/lbnl_net.nhc
540a357023f897052b7239f6c676d35ddcbc2de38a9f5632650b1e71e7f3b1ea  scripts/lbnl_nv.nhc
ee9db78b2709b585457bcec973bda7f5912125ac5929297cdb1289130b44e03e  scripts/lbnl_ps.nhc
EOF
cd "$tmp/src"
bad=$(sha256sum --strict -c ../nhc.sha256 2>/dev/null | grep -v ': OK$' | tr '\n' ' ' || true)
expected=$(awk '$2 ~ /^(helpers|scripts)\// {print $2}' ../nhc.sha256 | sort)
present=$(find helpers scripts -type f 2>/dev/null | sort || true)
extra=$(printf '%s\n' "$present" | grep -v '^$' | grep -vxF "$expected" | tr '\n' ' ' || true)
if [ -n "$bad" ] || [ -n "$extra" ]; then
  echo "NHC: $url is not NHC 1.4.3 as pinned in bringup/fetch_nhc.sh (sha256 per file of tag 1.4.3):" \
       "${bad:+differs or missing: ${bad% }}${bad:+${extra:+; }}${extra:+not in 1.4.3: ${extra% }}." \
       "A mirror (ORCHGEN_NHC_URL) must serve that release's archive unchanged" >&2
  exit 1
fi
mkdir -p "$(dirname "$dest")"
rm -rf "$dest"
mv "$tmp/src" "$dest"
chmod 0755 "$dest"
