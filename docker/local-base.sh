#!/usr/bin/env bash
# Makes the Dockerfile's two base images without an image registry, for machines that reach
# Debian's package mirror but no registry (the development machines and CI):
#   - a Debian bookworm root made by debootstrap (minbase) and trimmed like the slim images,
#     standing in for debian:bookworm-slim;
#   - that root plus gcc and libc6-dev (what the official rust slim images carry; no make, which
#     the Dockerfile installs itself), this machine's Rust toolchain and its certificate bundle,
#     standing in for rust:<version>-slim-bookworm.
# Prints the two build arguments that select them. An image that already exists is kept.
#
#   docker/local-base.sh        ->  --build-arg RUNTIME_IMAGE=... --build-arg RUST_IMAGE=...
#
# Needs root (debootstrap), debootstrap, a running Docker engine, and rustc on PATH.
set -euo pipefail

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
rust_release=$(rustc --version | awk '{print $2}')  # 1.95.0
rust_minor=${rust_release%.*}                         # 1.95
debian_image=${CAIRN_LOCAL_DEBIAN_IMAGE:-cairn-local/debian:bookworm-slim}
rust_image=${CAIRN_LOCAL_RUST_IMAGE:-cairn-local/rust:${rust_minor}-slim-bookworm}
host_ca=$(realpath "${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}")

say() { echo "local-base: $*" >&2; }
root=""  # the debootstrap directory while it exists
trap '[ -z "$root" ] || rm -rf "$root" "$root.log"' EXIT
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

make_debian() {
    root=$(mktemp -d /var/tmp/cairn-bookworm.XXXXXX)
    say "debootstrap bookworm into $root (about 2 minutes)"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 \
        || { tail -20 "$root.log" >&2; exit 1; }
    rm -f "$root.log"
    # Trim what the slim images leave out, and keep later installs from bringing it back.
    cat >"$root/etc/dpkg/dpkg.cfg.d/cairn-local-slim" <<'EOF'
# Like debian:*-slim: no documentation, manual pages or translations (copyright files stay).
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
    cat >"$root/etc/apt/apt.conf.d/cairn-local-slim" <<'EOF'
// Like the official images: no recommended packages, and no downloaded .deb files kept.
APT::Install-Recommends "false";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };
EOF
    find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
        "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' - "$debian_image" >/dev/null
    rm -rf "$root"
    root=""
    say "made $debian_image"
}

make_rust() {
    local sysroot name
    sysroot=$(rustc --print sysroot)
    name=cairn-local-rust-$$
    say "adding gcc, libc6-dev and the Rust $rust_release toolchain from $sysroot"
    # The toolchain comes in read-only from the host; documentation (share/) stays out. So does
    # the host's certificate bundle: where a proxy re-signs TLS, cargo in the build must trust
    # what the host trusts to reach crates.io.
    docker run --name "$name" -v "$sysroot:/toolchain:ro" -v "$host_ca:/host-ca.crt:ro" \
        "$debian_image" bash -euc '
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends ca-certificates gcc libc6-dev >/dev/null
        rm -rf /var/lib/apt/lists/*
        cp /host-ca.crt /etc/ssl/certs/ca-certificates.crt
        mkdir -p /usr/local/rust /usr/local/cargo
        cp -a /toolchain/bin /toolchain/lib /toolchain/libexec /usr/local/rust/
        chmod -R a+w /usr/local/cargo
        /usr/local/rust/bin/cargo --version' >&2
    docker commit \
        --change 'ENV CARGO_HOME=/usr/local/cargo' \
        --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        "$name" "$rust_image" >/dev/null
    docker rm "$name" >/dev/null
    say "made $rust_image"
}

have_image "$debian_image" || make_debian
have_image "$rust_image" || make_rust
echo "--build-arg RUNTIME_IMAGE=$debian_image --build-arg RUST_IMAGE=$rust_image"
