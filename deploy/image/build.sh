#!/usr/bin/env bash
# gpufrag's OCI image, built here without a container engine or a registry: the same image the
# Dockerfile next to this script describes, assembled from Debian's packages and PyPI's wheels.
#
#   deploy/image/build.sh     build (or find cached) the image; prints its size, then on its last
#                             line the image as LAYOUT:TAG (an OCI image layout directory and tag)
#
# The steps, each cached under GPUFRAG_CACHE_DIR (default ~/.cache/gpufrag)/image:
#   1. a Debian bookworm root filesystem (variant minbase, the packages in packages.txt, the
#      non-root user gpufrag 10001:10001, /data owned by it) made by mmdebstrap from
#      deb.debian.org, as a tarball keyed by the package list and this recipe; 1-3 minutes cold;
#   2. the locked wheels (requirements.lock, CPython 3.11, manylinux x86_64) downloaded from PyPI
#      by pip, keyed by the lock's hash; about 400 MB;
#   3. the project's wheel (`pip wheel . --no-deps`), built every time (seconds);
#   4. a venv at /opt/gpufrag made by the rootfs's own python3 inside a chroot, the locked wheels
#      and the project's installed into it offline (--no-index --no-deps, then `pip check`), no pip
#      left in it; umoci then writes two layers (the Debian rootfs, /opt/gpufrag) and the config
#      (entrypoint, user, env, OCI labels). The finished layout is cached keyed by steps 1-3's keys
#      and the project wheel's RECORD (its files' hashes), so an unchanged checkout is found at once.
#
# Needs root (mmdebstrap --mode=root and chroot; bind mounts in a private mount namespace),
# mmdebstrap and umoci (Debian packages), and a Python with pip on the host (PYTHON, default
# python3) to download and build wheels. A cached root filesystem is not refreshed by itself: delete
# $CACHE/rootfs-* (or set GPUFRAG_IMAGE_REFRESH=1) to take Debian's newer security updates.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${GPUFRAG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufrag}/image
PY=${PYTHON:-python3}
MIRROR=${GPUFRAG_DEBIAN_MIRROR:-http://deb.debian.org}
SUITE=bookworm
APP_UID=10001
PIP_VERSION=26.3 # runs inside the chroot to install the wheels; not left in the image
# bookworm's glibc is 2.36, so any manylinux tag up to 2.36 fits; pip takes a --platform for
# each (given one, it does not add the older ones itself), the legacy aliases included.
WHEEL_TARGET=(--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311)
for minor in $(seq 36 -1 5); do WHEEL_TARGET+=(--platform "manylinux_2_${minor}_x86_64"); done
WHEEL_TARGET+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64
               --platform manylinux1_x86_64)
ENV_PATH=/opt/gpufrag/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

die() { echo "build.sh: $*" >&2; exit 1; }
say() { echo "build.sh: $*" >&2; }
hash_of() { sha256sum | cut -c1-16; }

for tool in mmdebstrap umoci chroot unshare; do
  command -v "$tool" >/dev/null || die "$tool is needed (apt-get install mmdebstrap umoci)"
done
[ "$(id -u)" = 0 ] || die "run as root: mmdebstrap --mode=root, chroot and bind mounts need it"

PACKAGES=$(grep -v '^[[:space:]]*#' "$HERE/packages.txt" | awk NF | paste -sd, -)
VERSION=$("$PY" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "$ROOT/pyproject.toml")

# What the Debian slim images leave out (their /etc/dpkg/dpkg.cfg.d/docker), left out here too:
# manuals, docs but their copyright files, translations.
DPKG_OPTS=(--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
           --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
           --dpkgopt='path-exclude=/usr/share/locale/*')
USER_HOOK="chroot \"\$1\" groupadd --gid $APP_UID gpufrag && chroot \"\$1\" useradd --uid $APP_UID --gid $APP_UID --home-dir /data --no-create-home --shell /usr/sbin/nologin gpufrag && install -d -o $APP_UID -g $APP_UID -m 0750 \"\$1/data\""
SOURCES=("deb $MIRROR/debian $SUITE main" "deb $MIRROR/debian $SUITE-updates main"
         "deb $MIRROR/debian-security $SUITE-security main")

rootfs_tarball() {
  local key out
  key=$(printf '%s\n' "$PACKAGES" "$SUITE" "${SOURCES[@]}" "${DPKG_OPTS[@]}" "$USER_HOOK" | hash_of)
  out="$CACHE/rootfs-$SUITE-$key.tar"
  if [ ! -f "$out" ] || [ -n "${GPUFRAG_IMAGE_REFRESH:-}" ]; then
    say "making the Debian $SUITE root filesystem ($PACKAGES) with mmdebstrap (1-3 minutes)"
    local start=$SECONDS
    # --skip=output/mknod: no device nodes in the layer (a runtime makes /dev); the directory stays.
    mmdebstrap --quiet --mode=root --format=tar --variant=minbase --include="$PACKAGES" "${DPKG_OPTS[@]}" \
      --customize-hook="$USER_HOOK" --skip=output/mknod \
      "$SUITE" "$out.tmp.$$" "${SOURCES[@]}" >&2 || { rm -f "$out.tmp.$$"; die "mmdebstrap failed"; }
    mv -f "$out.tmp.$$" "$out"
    say "root filesystem made in $((SECONDS - start)) s"
  fi
  echo "$out"
}

locked_wheels() {
  local key out
  key=$({ cat "$HERE/requirements.lock"; echo "${WHEEL_TARGET[*]} pip==$PIP_VERSION"; } | hash_of)
  out="$CACHE/wheels-$key"
  if [ ! -f "$out/.complete" ]; then
    say "downloading the locked wheels from PyPI into $out"
    rm -rf "$out" && mkdir -p "$out"
    "$PY" -m pip download -q --no-deps "${WHEEL_TARGET[@]}" -d "$out" \
      -r "$HERE/requirements.lock" "pip==$PIP_VERSION" >&2 || die "pip download failed"
    touch "$out/.complete"
  fi
  echo "$out"
}

# Sizes of an image layout: its blobs as stored (what a registry holds), and unpacked.
print_size() {
  local layout=$1
  "$PY" - "$layout" "$(cat "$layout/unpacked-bytes")" <<'PY'
import json, pathlib, sys
layout, unpacked = pathlib.Path(sys.argv[1]), int(sys.argv[2])
index = json.loads((layout / "index.json").read_text())
blob = lambda d: layout / "blobs" / d["digest"].replace(":", "/")
manifest = json.loads(blob(index["manifests"][0]).read_text())
stored = sum(layer["size"] for layer in manifest["layers"]) + manifest["config"]["size"]
print(f"image size: {stored / 1e6:.0f} MB compressed ({len(manifest['layers'])} layers), "
      f"{unpacked / 1e6:.0f} MB unpacked")
PY
}

# $1: the rootfs tarball, $2: the wheels directory, $3: the project's wheel, $4: the layout to
# write. Runs in a private mount namespace so that the bind mounts go away with it.
assemble() {
  local tarball=$1 wheels=$2 wheel=$3 layout=$4 work
  work=$(mktemp -d "$CACHE/work.XXXXXX")
  trap 'rm -rf "$work"' RETURN
  local rootfs="$work/rootfs" created revision
  # The commit's time, not the clock's: the same checkout gives the same config.
  created=$(git -C "$ROOT" log -1 --format=%cI 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
  revision=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
  mkdir -p "$rootfs" && tar -C "$rootfs" -xf "$tarball"

  umoci init --layout "$layout"
  umoci new --image "$layout:$VERSION"
  umoci config --image "$layout:$VERSION" --no-history --architecture amd64 --os linux
  umoci insert --image "$layout:$VERSION" --history.created "$created" --history.created_by "mmdebstrap $SUITE minbase: $PACKAGES" \
    "$rootfs" /

  say "installing the locked wheels and $(basename "$wheel") into /opt/gpufrag (chroot)"
  mkdir -p "$rootfs/mnt/wheels" "$rootfs/mnt/dist"
  cp "$HERE/requirements.lock" "$rootfs/mnt/requirements.lock"
  # env -i in the chroot: the host PIP_* settings (a find-links path, a cert file) mean nothing
  # there. pip runs from its wheel file (pip.whl/pip), so no pip is installed into the venv.
  unshare --mount --propagation private sh -euc '
    rootfs=$1 wheels=$2 dist=$3 wheel=$4 pip=$5
    mount --bind -o ro "$wheels" "$rootfs/mnt/wheels"
    mount --bind -o ro "$dist" "$rootfs/mnt/dist"
    mount --rbind /dev "$rootfs/dev"
    mount -t proc proc "$rootfs/proc"
    chroot "$rootfs" /usr/bin/python3 -m venv --without-pip /opt/gpufrag
    run_pip() { chroot "$rootfs" env -i PATH=/usr/bin:/bin HOME=/root PYTHONDONTWRITEBYTECODE=1 \
                  /opt/gpufrag/bin/python \
                  "/mnt/wheels/$pip/pip" "$@" --disable-pip-version-check -q; }
    run_pip install --no-index --no-deps --no-cache-dir --find-links /mnt/wheels \
      -r /mnt/requirements.lock "/mnt/dist/$wheel"
    run_pip check
  ' build "$rootfs" "$wheels" "$(dirname "$wheel")" "$(basename "$wheel")" \
    "$(cd "$wheels" && ls pip-"$PIP_VERSION"-*.whl)" || die "installing into the image failed"

  umoci insert --image "$layout:$VERSION" --history.created "$created" --history.created_by "venv /opt/gpufrag: requirements.lock + $(basename "$wheel")" \
    "$rootfs/opt/gpufrag" /opt/gpufrag
  du -sb --exclude=./mnt --exclude=./proc "$rootfs" | cut -f1 > "$layout/unpacked-bytes"

  umoci config --image "$layout:$VERSION" --no-history --created "$created" \
    --config.entrypoint gpufrag --config.user "$APP_UID:$APP_UID" --config.workingdir /data \
    --config.env "PATH=$ENV_PATH" --config.env HOME=/data --config.env XDG_DATA_HOME=/data \
    --config.env LANG=C.UTF-8 --config.env PYTHONUNBUFFERED=1 --config.env PYTHONDONTWRITEBYTECODE=1 \
    --config.volume /data --config.volume /tmp \
    --config.label "org.opencontainers.image.title=gpufrag" \
    --config.label "org.opencontainers.image.description=Find GPU fragmentation and OOM storms in Kubernetes clusters, live and from traces." \
    --config.label "org.opencontainers.image.version=$VERSION" \
    --config.label "org.opencontainers.image.revision=$revision" \
    --config.label "org.opencontainers.image.created=$created" \
    --config.label "org.opencontainers.image.licenses=Apache-2.0" \
    --config.label "org.opencontainers.image.source=https://github.com/gpufrag/gpufrag" \
    --config.label "org.opencontainers.image.base.name=debian:$SUITE (mmdebstrap minbase)"
  umoci gc --layout "$layout"
}

mkdir -p "$CACHE"
total_start=$SECONDS
tarball=$(rootfs_tarball)
wheels=$(locked_wheels)

dist=$(mktemp -d "$CACHE/dist.XXXXXX")
trap 'rm -rf "$dist"' EXIT
"$PY" -m pip wheel -q --no-deps --disable-pip-version-check -w "$dist" "$ROOT" >&2 \
  || die "building the project's wheel failed"
wheel=$(ls "$dist"/gpufrag-*.whl)

image_key=$({ basename "$tarball"; basename "$wheels"; sha256sum "$HERE/build.sh" | cut -c1-64
              "$PY" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); sys.stdout.buffer.write(b"".join(z.read(n) for n in z.namelist() if n.endswith(".dist-info/RECORD")))' "$wheel"
              git -C "$ROOT" rev-parse HEAD 2>/dev/null || true
            } | hash_of)
layout="$CACHE/oci-$image_key"

# Keeps the newest $1 finished entries named $2-*. An entry still being written (`.tmp` in its
# name) is another checkout's build in progress, never pruned: matching it broke two builds
# running at once.
prune() {
  local keep=$1 kind=$2
  find "$CACHE" -maxdepth 1 -name "$kind-*" ! -name '*.tmp*' -printf '%T@ %p\n' 2>/dev/null \
    | sort -rn | tail -n +"$((keep + 1))" | cut -d' ' -f2- | xargs -r -d '\n' rm -rf
}
if [ ! -f "$layout/.complete" ]; then
  rm -rf "$layout" "$layout.tmp"
  assemble "$tarball" "$wheels" "$wheel" "$layout.tmp"
  touch "$layout.tmp/.complete" && mv "$layout.tmp" "$layout"
  # Older entries are the previous checkouts' and locks' (an image is 430 MB, the wheels as
  # much, a root filesystem 170 MB): keep the newest three images and two of the others.
  prune 3 oci; prune 2 wheels; prune 2 rootfs
  say "image assembled in $((SECONDS - total_start)) s"
else
  say "image found in the cache ($((SECONDS - total_start)) s)"
fi
print_size "$layout"
echo "$layout:$VERSION"
