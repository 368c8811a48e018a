#!/usr/bin/env bash
# Create .venv and install pyspark-ducklake (editable) with its extras and the `test` and `dev` dependency groups.
# Idempotent: does nothing when .venv/.setup-stamp matches the hash of pyproject.toml and this script.
# Installs nothing outside .venv (except python3-venv from apt, as root, when the system python lacks venv).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV=.venv
STAMP="$VENV/.setup-stamp"
PYTHON="${PYTHON:-python3}"
EXTRAS="postgres,kafka,s3,gcs,azure,docs"
GROUPS_TO_INSTALL=(test dev)

want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] && "$VENV/bin/python" -c '' 2>/dev/null; then
    exit 0
fi

venv_ok() {
    "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null
}

if ! venv_ok; then
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        echo "setup: need Python >= 3.10 as '$PYTHON' (set PYTHON=/path/to/python3.x)" >&2
        exit 1
    fi
    echo "setup: creating $VENV with $("$PYTHON" --version 2>&1)"
    if ! "$PYTHON" -m venv --clear "$VENV"; then
        # Debian's system python ships venv/ensurepip separately.
        if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
            echo "setup: installing python3-venv from apt"
            DEBIAN_FRONTEND=noninteractive apt-get update -q
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv
            "$PYTHON" -m venv --clear "$VENV"
        else
            echo "setup: '$PYTHON -m venv' failed; install your distribution's python3-venv package" >&2
            exit 1
        fi
    fi
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
fi

PIP=("$VENV/bin/python" -m pip)
# `--group` (PEP 735 dependency groups) needs pip >= 25.1; a no-op when already satisfied.
"${PIP[@]}" install --quiet 'pip>=25.1'

group_args=()
for g in "${GROUPS_TO_INSTALL[@]}"; do group_args+=(--group "$g"); done

echo "setup: installing pyspark-ducklake[$EXTRAS] (editable) and groups: ${GROUPS_TO_INSTALL[*]}"
"${PIP[@]}" install --quiet -e ".[$EXTRAS]" "${group_args[@]}"

if ! command -v java >/dev/null; then
    echo "setup: warning: no 'java' on PATH; Spark needs a JDK 17 (apt-get install openjdk-17-jre-headless)" >&2
fi

# Azurite (npm) for the az:// tests, into .cache/azurite; without npm those tests fail and say how to get it
if command -v npm >/dev/null; then bash scripts/azurite.sh install >/dev/null; else
    echo "setup: warning: no 'npm' on PATH; the Azure tests need it for Azurite (apt-get install nodejs npm)" >&2
fi

echo "$want" >"$STAMP"
echo "setup: done ($VENV)"
