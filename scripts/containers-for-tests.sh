#!/usr/bin/env bash
# Makes the container engines ready for ContainerSandbox's tests, as far as this machine
# allows, and prints the environment the tests read (nothing for what could not be made,
# and those tests then skip, saying why):
#   TETHER_TEST_ROOTFS   a Debian root file system (minbase, python3, git) for podman,
#                        built once with debootstrap into .cache/ (about 30 s)
#   DOCKER_HOST          a docker daemon of the tests' own, with that tree as the image
#                        tether-sandbox-test
# Idempotent: installs Debian packages only when missing, builds the tree once, starts
# the daemon only when it is down. Everything but the assignments goes to stderr.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ROOTFS="$ROOT/.cache/sandbox-rootfs"
IMAGE=tether-sandbox-test
DOCKER_DIR=/run/tether-test-docker
SOCKET="unix://$DOCKER_DIR/docker.sock"

# What is missing, installed at once (one `apt-get update`). Containers with enforced
# limits need root here: as another user, nothing is installed and the tests skip.
packages() {
    local missing=()
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v podman >/dev/null || missing+=(podman)
    command -v runc >/dev/null || missing+=(runc)
    command -v dockerd >/dev/null || missing+=(docker.io)
    [ "${#missing[@]}" = 0 ] && return 0
    [ "$(id -u)" = 0 ] || return 1
    apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

rootfs() {
    [ -x "$ROOTFS/bin/sh" ] && return 0
    command -v debootstrap >/dev/null || return 1
    local building="$ROOTFS.building"
    rm -rf "$building"
    mkdir -p "$(dirname "$ROOTFS")"
    debootstrap --variant=minbase --include=python3,git bookworm "$building" \
        http://deb.debian.org/debian >/dev/null || return 1
    rm -rf "$building"/var/cache/apt/archives/*.deb "$building"/usr/share/doc "$building"/usr/share/man
    mv "$building" "$ROOTFS"
}

podman_ready() {
    command -v podman >/dev/null && command -v runc >/dev/null && podman info >/dev/null 2>&1
}

docker_ready() {
    command -v dockerd >/dev/null || return 1
    if ! DOCKER_HOST="$SOCKET" docker version >/dev/null 2>&1; then
        mkdir -p "$DOCKER_DIR"
        # No bridge, no iptables: the tests' containers have no network or none of their own.
        setsid dockerd --iptables=false --ip6tables=false --bridge=none --ip-masq=false \
            --data-root "$DOCKER_DIR/data" --exec-root "$DOCKER_DIR/exec" \
            --pidfile "$DOCKER_DIR/docker.pid" --host "$SOCKET" \
            >"$DOCKER_DIR/log" 2>&1 </dev/null &
        for _ in $(seq 1 60); do
            DOCKER_HOST="$SOCKET" docker version >/dev/null 2>&1 && break
            sleep 0.5
        done
    fi
    DOCKER_HOST="$SOCKET" docker image inspect "$IMAGE" >/dev/null 2>&1 ||
        tar -C "$ROOTFS" -c . | DOCKER_HOST="$SOCKET" docker import - "$IMAGE" >/dev/null
}

{
    packages
    made_rootfs=0
    rootfs && made_rootfs=1
    podman_ok=0
    [ "$made_rootfs" = 1 ] && podman_ready && podman_ok=1
    docker_ok=0
    [ "$made_rootfs" = 1 ] && docker_ready && docker_ok=1
} >&2
[ "$made_rootfs" = 1 ] && echo "TETHER_TEST_ROOTFS=$ROOTFS"
[ "$docker_ok" = 1 ] && echo "DOCKER_HOST=$SOCKET"
true
