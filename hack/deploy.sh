#!/usr/bin/env bash
# Applies config/default (or the kustomization DEPLOY_CONFIG names, such as
# config/prometheus) to the cluster of the current kubeconfig with the
# operator image set to IMAGE, or deletes what it applied.
#
#   hack/deploy.sh apply IMAGE     # e.g. example.com/profile-scheduler:v0.1.0
#   hack/deploy.sh delete [IMAGE]
#   hack/deploy.sh render [IMAGE]  # print the manifests only
set -euo pipefail

action=${1:?usage: hack/deploy.sh apply|delete IMAGE}
image=${2:-profile-scheduler:latest}
root=$(cd "$(dirname "$0")/.." && pwd)
config=$(realpath "${DEPLOY_CONFIG:-$root/config/default}")

# Split IMAGE into name and tag or digest; a registry host may carry a port.
name=$image tag="" digest=""
if [[ $image == *@* ]]; then
  name=${image%@*} digest=${image#*@}
elif [[ ${image##*/} == *:* ]]; then
  name=${image%:*} tag=${image##*:}
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo "resources:"
  echo "- $(realpath --relative-to="$work" "$config")"
  echo "images:"
  echo "- name: profile-scheduler"
  echo "  newName: $name"
  [[ -n $tag ]] && echo "  newTag: \"$tag\""
  [[ -n $digest ]] && echo "  digest: $digest"
  true
} >"$work/kustomization.yaml"

case $action in
  apply) kubectl apply --server-side -k "$work" ;;
  delete) kubectl delete --ignore-not-found -k "$work" ;;
  render) kubectl kustomize "$work" ;;
  *) echo "unknown action $action: want apply, delete or render" >&2; exit 2 ;;
esac
