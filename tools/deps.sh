#!/usr/bin/env bash
# Installs the Debian packages kvconn needs, or prints the apt-get line when
# not root. Quiet when everything is already there.
set -euo pipefail
pkgs=(make cmake ninja-build gcc clang llvm libclang-rt-14-dev libcriterion-dev libsqlite3-dev pkg-config python3 libibverbs-dev libsodium-dev afl++ zip
      chromium # chromium: tools/test_report.sh renders kvsim report pages headless
      curl) # curl: tools/test_http_boot.sh is a real HTTP client of kvnode's bootstrap server
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "deps: missing packages; run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
