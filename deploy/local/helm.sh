#!/usr/bin/env bash
# Helm, built from the Go module proxy (no release binary is downloaded: the proxy is the only
# source this project's machines reach).
#
#   deploy/local/helm.sh build    build (or find cached) helm and print its path on the last line
#   deploy/local/helm.sh path     print the cached binary's path if it is built, else exit 1
#
# The module is helm.sh/helm/v4 at HELM_VERSION (default v4.3.2); its go.mod has no replace
# directives, so `go install MODULE/cmd/helm@VERSION` builds exactly what the proxy serves, with
# the same -X version flags the project's Makefile sets (so `helm version` names the release).
# The binary is cached at GPUFRAG_CACHE_DIR (default ~/.cache/gpufrag)/helm-VERSION/helm; a cold
# build takes a few minutes on 2 cores (run under `nice -n 19`, GOFLAGS defaults to -p=2), a
# cached one returns at once.
set -euo pipefail

VERSION=${HELM_VERSION:-v4.3.2}
CACHE=${GPUFRAG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufrag}/helm-$VERSION
BIN=$CACHE/helm

die() { echo "helm.sh: $*" >&2; exit 1; }

build() {
  if [ -x "$BIN" ]; then echo "$BIN"; return 0; fi
  command -v go >/dev/null || die "Go is needed to build helm (none found on PATH)"
  echo "helm.sh: building helm $VERSION from the Go module proxy into $CACHE" \
       "(a cold build takes minutes)" >&2
  mkdir -p "$CACHE"
  local tmp start=$SECONDS pkg=helm.sh/helm/v4/internal/version
  tmp=$(mktemp -d "$CACHE/build.XXXXXX")
  # GOFLAGS=-mod=mod: `go install pkg@version` refuses -mod=vendor/readonly set from outside.
  ( cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=${GOFLAGS:--p=2} nice -n 19 \
      go install -trimpath \
        -ldflags "-s -w -X $pkg.version=$VERSION -X $pkg.gitTreeState=clean" \
        "helm.sh/helm/v4/cmd/helm@$VERSION" ) >&2 \
    || { rm -rf "$tmp"; die "building helm $VERSION failed"; }
  mv -f "$tmp/helm" "$BIN"
  rm -rf "$tmp"
  echo "helm.sh: built helm $VERSION in $((SECONDS - start)) s" >&2
  echo "$BIN"
}

case "${1:-}" in
  build) build ;;
  path) if [ -x "$BIN" ]; then echo "$BIN"; else echo "helm.sh: not built" >&2; exit 1; fi ;;
  *) echo "usage: $0 build | path" >&2; exit 2 ;;
esac
