#!/usr/bin/env bash
# What the web console's browser test (crates/ferry-cli/tests/console.rs, which runs
# crates/ferry-cli/tests/console/console.mjs) drives the page with: Debian's `chromium`,
# run as /usr/bin/chromium, and from the npm registry the exact versions that
# crates/ferry-cli/tests/console/package-lock.json pins of `playwright-core` (the browser
# automation library, without a browser of its own) and `@axe-core/playwright` with
# `axe-core` (the accessibility checks). Node.js 20 and npm are the machine's.
# Playwright never downloads a browser here (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1): the test
# launches Debian's. node_modules is installed by `npm ci`, never committed, and kept
# while it matches the lock, so a second run installs nothing.
# Under CI=true a test whose package is missing fails instead of skipping, so every script
# that runs the suite installs them first. Installs as root, or through sudo.
set -euo pipefail
scripts=$(cd "$(dirname "$0")" && pwd)
"$scripts/debian-packages.sh" chromium
cd "$scripts/../crates/ferry-cli/tests/console"

# npm ci deletes node_modules and installs it again every time: it runs only when the lock
# differs from the one the last whole install recorded (written after npm ci succeeded).
stamp=node_modules/.installed-lock.sha256
if ! sha256sum --status -c "$stamp" 2>/dev/null; then
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >/dev/null
  sha256sum package-lock.json >"$stamp"
fi
