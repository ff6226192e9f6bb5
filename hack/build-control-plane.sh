#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, etcd and
# kube-controller-manager, whose PV binder and garbage collector the storage
# and WaitingPod tests rely on) from the Go module
# proxy and caches the binaries outside the checkout, so a fresh clone reuses
# them. Prints the directory that holds the binaries on its last line; that
# directory is what KUBEBUILDER_ASSETS points at.
#
# The k8s.io/kubernetes module cannot be required as-is: its go.mod replaces
# every k8s.io staging module with a local ./staging path. A throw-away module
# requires it and pins each staging module to the matching v0.x release.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
STAGING_VERSION=v0.${K8S_VERSION#1.}
CACHE_ROOT=${PROFILE_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/profile-scheduler}
DEST=$CACHE_ROOT/control-plane/v$K8S_VERSION
WANT=${WANT:-kube-apiserver etcd kube-controller-manager}

missing=""
for bin in $WANT; do
  [[ -x $DEST/$bin ]] || missing="$missing $bin"
done
if [[ -z $missing ]]; then
  echo "$DEST"
  exit 0
fi

log() { echo ">> $*" >&2; }
log "building$missing v$K8S_VERSION into $DEST (the first build takes about 15 minutes on 2 cores)"
mkdir -p "$DEST"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

export GOFLAGS=-mod=mod
go mod init control-plane-build >/dev/null 2>&1
log "downloading k8s.io/kubernetes@v$K8S_VERSION"
kdir=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -n $kdir ]] || { echo "cannot locate k8s.io/kubernetes@v$K8S_VERSION in the module cache" >&2; exit 1; }

args=(-require "k8s.io/kubernetes@v$K8S_VERSION")
for mod in $(sed -n 's/^[[:space:]]*\(k8s\.io\/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\.\/staging\/.*/\1/p' "$kdir/go.mod"); do
  args+=(-replace "$mod=$mod@$STAGING_VERSION")
done
go mod edit "${args[@]}"

cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
mkdir etcd
cat >etcd/main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
log "resolving dependencies"
go mod tidy >/dev/null 2>&1 || go mod tidy

minor=${K8S_VERSION#1.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
for bin in $missing; do
  log "compiling $bin"
  case $bin in
    etcd) go build -trimpath -ldflags "-s -w" -o "$DEST/etcd.tmp" ./etcd ;;
    *) go build -trimpath -ldflags "$ldflags" -o "$DEST/$bin.tmp" "k8s.io/kubernetes/cmd/$bin" ;;
  esac
  mv "$DEST/$bin.tmp" "$DEST/$bin"
done
log "done"
echo "$DEST"
