#!/usr/bin/env bash
# Azurite (Microsoft's Azure Storage emulator, from npm) for the tests of az:// / abfs:// lakes, installed into
# .cache/azurite/ (never globally). The tests start their own blob server on a free port (tests/support/emulators.py).
#
#   scripts/azurite.sh install   install it when missing (a no-op, in milliseconds, when already there); prints the
#                                path of its azurite-blob executable
#   scripts/azurite.sh path      print that path (exit 3 when not installed)
#
# Environment: AZURITE_VERSION (default 3.37.0).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSION="${AZURITE_VERSION:-3.37.0}"
DIR="$ROOT/.cache/azurite/$VERSION"
BIN="$DIR/node_modules/.bin/azurite-blob"

log() { echo "azurite.sh: $*" >&2; }

case "${1:-}" in
install)
    if [[ ! -x "$BIN" ]]; then
        command -v npm >/dev/null || { log "npm not found: install Node.js (apt-get install nodejs npm)"; exit 1; }
        log "installing azurite@$VERSION into $DIR"
        mkdir -p "$DIR"
        # a private prefix: nothing lands outside the checkout
        npm install --prefix "$DIR" --no-audit --no-fund --silent "azurite@$VERSION" >&2
    fi
    echo "$BIN"
    ;;
path)
    [[ -x "$BIN" ]] || exit 3
    echo "$BIN"
    ;;
*)
    echo "usage: scripts/azurite.sh install|path" >&2
    exit 2
    ;;
esac
