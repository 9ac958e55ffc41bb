#!/usr/bin/env bash
# Builds the cairn image from this checkout with docker/Dockerfile and checks every promise of
# docs/DOCKER.md as a user meets it (docker/test_image.py: containers from the docker CLI, pymongo
# on the host, ports published on 127.0.0.1 only). Closes with 'N passed, N failed'.
#
#   docker/test.sh
#   RUST_IMAGE=rust:1.95-slim-bookworm RUNTIME_IMAGE=debian:bookworm-slim docker/test.sh
#
# Base images: RUST_IMAGE / RUNTIME_IMAGE when set; else the Dockerfile's defaults when they are
# present or can be pulled; else local stand-ins made by docker/local-base.sh (debootstrap and
# this machine's Rust toolchain: no image registry needed).
# Docker: when no engine answers and this runs as root, Debian's docker.io (and debootstrap) are
# installed with apt-get if missing, and dockerd is started for the run and stopped after it.
# CAIRN_TEST_IMAGE names the image built (default cairn:test).
set -euo pipefail
cd "$(dirname "$0")/.."
image=${CAIRN_TEST_IMAGE:-cairn:test}
work=target/docker-test
mkdir -p "$work"
started_s=$SECONDS

say() { echo "== $*"; }

dockerd_pid=""
# shellcheck disable=SC2317  # called by the EXIT trap
stop_dockerd() {
    [ -n "$dockerd_pid" ] || return 0
    kill -TERM "$dockerd_pid" 2>/dev/null || true
    wait "$dockerd_pid" 2>/dev/null || true
}
trap stop_dockerd EXIT

ensure_docker() {
    docker info >/dev/null 2>&1 && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "docker/test.sh: no Docker engine answers; start one (as root: apt-get install docker.io; dockerd &)" >&2
        exit 2
    fi
    if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
        say "installing docker.io and debootstrap (apt-get)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
    fi
    say "starting dockerd (log: $work/dockerd.log)"
    dockerd >"$work/dockerd.log" 2>&1 &
    dockerd_pid=$!
    local waited_s=0
    until docker info >/dev/null 2>&1; do
        if ! kill -0 "$dockerd_pid" 2>/dev/null || [ "$waited_s" -ge 60 ]; then
            tail -20 "$work/dockerd.log" >&2
            echo "docker/test.sh: dockerd did not come up" >&2
            exit 2
        fi
        sleep 1
        waited_s=$((waited_s + 1))
    done
}

# The Dockerfile's default for build argument $1.
default_of() { sed -n "s/^ARG $1=//p" docker/Dockerfile; }

available() {
    docker image inspect "$1" >/dev/null 2>&1 || docker pull -q "$1" >/dev/null 2>&1
}

base_args() {
    if [ -n "${RUST_IMAGE:-}${RUNTIME_IMAGE:-}" ]; then
        echo "--build-arg RUST_IMAGE=${RUST_IMAGE:-$(default_of RUST_IMAGE)}" \
            "--build-arg RUNTIME_IMAGE=${RUNTIME_IMAGE:-$(default_of RUNTIME_IMAGE)}"
    elif available "$(default_of RUST_IMAGE)" && available "$(default_of RUNTIME_IMAGE)"; then
        echo ""
    else
        docker/local-base.sh
    fi
}

ensure_docker

say "client: pymongo in $work/venv"
[ -x "$work/venv/bin/python" ] || python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check -r e2e/clients/requirements.txt

say "base images"
args_line=$(base_args)
read -r -a build_args <<<"$args_line"
if [ ${#build_args[@]} -eq 0 ]; then echo "the Dockerfile's defaults"; else echo "${build_args[*]}"; fi

say "docker build -f docker/Dockerfile -t $image ."
build_started_s=$SECONDS
docker build "${build_args[@]}" -f docker/Dockerfile -t "$image" . >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log"; echo "docker/test.sh: the build failed ($work/build.log)"; exit 1; }
echo "built in $((SECONDS - build_started_s)) s (log: $work/build.log)"

say "checks"
status=0
"$work/venv/bin/python" docker/test_image.py "$image" || status=$?
echo "docker/test.sh: $((SECONDS - started_s)) s in all"
exit "$status"
