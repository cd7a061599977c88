#!/usr/bin/env bash
# Sets up a kind cluster for olm-rs's end-to-end journeys:
#   1. a local image registry (localhost:5001) that the cluster's nodes pull from,
#   2. a kind cluster (reused when it exists),
#   3. the olm-rs image, built and loaded into the nodes,
#   4. the e2e catalog image (FROM the olm-rs image + e2e/catalog), pushed to the registry,
#   5. the Helm chart, installed with two replicas (leader election on).
# Then: OLM_RS_E2E_KUBECONFIG=$PWD/e2e/.kind/kubeconfig cargo test --test e2e
#
# Needs docker, kind and kubectl; helm is used when installed, else fetched by .ci/helm.
# Settings (environment): KIND_CLUSTER_NAME (olm-rs-e2e), OLM_RS_IMAGE (olm-rs:dev),
# OLM_RS_E2E_REGISTRY_PORT (5001), OLM_RS_E2E_REPLICAS (2). `e2e/kind.sh delete` removes the
# cluster and the registry.
#
# Why a registry: olm-rs, like OLM, runs a catalog image given by tag with imagePullPolicy
# Always, so that image must be pullable; `kind load` is enough for the controller image only.
set -euo pipefail
cd "$(dirname "$0")/.."

cluster=${KIND_CLUSTER_NAME:-olm-rs-e2e}
image=${OLM_RS_IMAGE:-olm-rs:dev}
registry_port=${OLM_RS_E2E_REGISTRY_PORT:-5001}
registry_name=${cluster}-registry
replicas=${OLM_RS_E2E_REPLICAS:-2}
catalog_image=localhost:${registry_port}/olm-rs-e2e-catalog:dev
state_dir=e2e/.kind
kubeconfig=${state_dir}/kubeconfig

say() { printf '\n==> %s\n' "$*"; }
need() {
  command -v "$1" >/dev/null 2>&1 || { echo "e2e/kind.sh needs $1 on PATH" >&2; exit 1; }
}

if [ "${1:-}" = "delete" ]; then
  need kind
  need docker
  kind delete cluster --name "$cluster"
  docker rm -f "$registry_name" >/dev/null 2>&1 || true
  rm -f "$kubeconfig"
  exit 0
fi

need docker
need kind
need kubectl
helm=$(command -v helm || .ci/helm)

say "local registry ${registry_name} on localhost:${registry_port}"
if [ "$(docker inspect -f '{{.State.Running}}' "$registry_name" 2>/dev/null || true)" != "true" ]; then
  docker rm -f "$registry_name" >/dev/null 2>&1 || true
  docker run -d --restart=always -p "127.0.0.1:${registry_port}:5000" --network bridge \
    --name "$registry_name" registry:2 >/dev/null
fi

say "kind cluster ${cluster}"
if ! kind get clusters 2>/dev/null | grep -qx "$cluster"; then
  # containerd reads per-registry settings from certs.d (written below for every node).
  kind create cluster --name "$cluster" --wait 120s --config - <<'EOF'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
containerdConfigPatches:
  - |-
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"
EOF
fi
mkdir -p "$state_dir"
kind get kubeconfig --name "$cluster" >"$kubeconfig"
export KUBECONFIG=$PWD/$kubeconfig

# Inside the nodes, localhost:<port> is the registry container on kind's network.
for node in $(kind get nodes --name "$cluster"); do
  docker exec "$node" mkdir -p "/etc/containerd/certs.d/localhost:${registry_port}"
  printf '[host."http://%s:5000"]\n' "$registry_name" |
    docker exec -i "$node" cp /dev/stdin "/etc/containerd/certs.d/localhost:${registry_port}/hosts.toml"
done
if [ "$(docker inspect -f '{{json .NetworkSettings.Networks.kind}}' "$registry_name")" = "null" ]; then
  docker network connect kind "$registry_name"
fi
# The documented way to tell tools about a cluster's local registry (KEP-1755).
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: local-registry-hosting
  namespace: kube-public
data:
  localRegistryHosting.v1: |
    host: "localhost:${registry_port}"
    help: "https://kind.sigs.k8s.io/docs/user/local-registry/"
EOF

say "olm-rs image ${image}"
docker build -t "$image" .
kind load docker-image "$image" --name "$cluster"

say "e2e catalog image ${catalog_image} (FROM ${image} + e2e/catalog)"
docker build -t "$catalog_image" --build-arg "OLM_RS_IMAGE=${image}" -f e2e/catalog.Dockerfile e2e
docker push "$catalog_image"

say "helm chart (replicas=${replicas})"
"$helm" upgrade --install olm-rs charts/olm-rs \
  --kubeconfig "$KUBECONFIG" \
  --set "image.repository=${image%:*}" \
  --set "image.tag=${image##*:}" \
  --set "image.pullPolicy=IfNotPresent" \
  --set "replicas=${replicas}" \
  --wait --timeout 5m

kubectl -n olm rollout status deployment/olm-rs-controller --timeout=120s

cat <<EOF

Ready. Run the journeys with:

  OLM_RS_E2E_KUBECONFIG=$KUBECONFIG cargo test --test e2e

Remove everything with: e2e/kind.sh delete
EOF
