#!/usr/bin/env bash
# The Debian packages the test suite drives Ferry with: Debian's own AWS CLI (`awscli`,
# AWS CLI 2.9.19 on Debian 12, whose SQS model is the query protocol) for
# crates/ferry-cli/tests/aws_cli.rs, which runs it as /usr/bin/aws; kcat for
# crates/ferry-kafka/tests/kcat.rs; librdkafka-dev (librdkafka 2.0.2) and pkg-config, which
# the `rdkafka` crate of crates/ferry-kafka/tests/rdkafka.rs links against and finds it
# with; gcc, g++ and make, which build librdkafka's own test suite
# (scripts/compat/librdkafka.sh, crates/ferry-cli/tests/librdkafka.rs).
# Under CI=true a test whose package is missing fails instead of skipping, so every script
# that runs the suite installs them first. Installs as root, or through sudo.
# Given package names (`debian-packages.sh chromium`), it installs those instead, the same
# way: scripts/console-packages.sh does so for the browser.
set -euo pipefail
if [ $# -gt 0 ]; then
  packages=("$@")
else
  packages=(awscli kcat librdkafka-dev pkg-config gcc g++ make)
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null; then
  as_root=(sudo)
else
  echo "debian-packages.sh: ${missing[*]} missing, and not root without sudo to install them" >&2
  exit 1
fi
install() {
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}
# The package lists may be missing or stale: refreshed once if the install fails.
if ! install; then
  "${as_root[@]}" apt-get update -q >/dev/null
  install
fi
